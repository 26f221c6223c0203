/**
 * The accepted range of a number option. Each range is written once (`RANGES` in
 * `redlock-options.ts`): its check (`inRange`) and the "expected ..." of its error
 * (`EXPECTED_NUMBER` in `option.messages.ts`) are both read from it, so they cannot drift apart.
 * @internal
 */
export interface NumberRange {
  /** Integers only; `'safe'`: safe integers only. */
  readonly integer?: boolean | 'safe';
  /** A duration, in ms. */
  readonly ms?: boolean;
  /** What the number is, where "a number" would say too little (`'a port number'`). */
  readonly noun?: string;
  readonly min: number;
  /** `min` itself is refused. */
  readonly aboveMin?: boolean;
  readonly max?: number;
  /** `max` itself is refused. */
  readonly belowMax?: boolean;
  /** Infinity is accepted besides the range. */
  readonly orInfinity?: boolean;
  /** What `min` does (`'off'`), for the message. */
  readonly minMeans?: string;
  /** What the value is, for the message (`'how many holders the key admits at once'`). */
  readonly means?: string;
}

/** Whether `value` is a number in `range`. @internal */
export function inRange(range: NumberRange, value: unknown): value is number {
  if (typeof value !== 'number' || Number.isNaN(value)) return false;
  if (range.orInfinity && value === Number.POSITIVE_INFINITY) return true;
  if (
    range.integer === 'safe'
      ? !Number.isSafeInteger(value)
      : range.integer && !Number.isInteger(value)
  )
    return false;
  if (range.aboveMin ? value <= range.min : value < range.min) return false;
  if (range.max === undefined) return true;
  return range.belowMax ? value < range.max : value <= range.max;
}
