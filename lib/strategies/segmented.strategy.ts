/**
 * Segmented strategy (placeholder until the segmented-strategy issue lands).
 * @internal
 */
export class SegmentedStrategy {
  reset(_client: string, _key: string): void {}

  run(
    baseKey: string,
    _segments: number,
    _client: string,
    attempt: (sliceKey: string, segment: number) => Promise<unknown>,
  ): Promise<unknown> {
    return attempt(`${baseKey}:seg:0`, 0);
  }
}
