import { readmeBlock, readmeBlocks, readmeCommands } from '../../scripts/readme-blocks';

const README = [
  '# app',
  '<!-- check: quick-start/main.ts -->',
  '```ts',
  "console.log('hi');",
  '```',
  '',
  '```ts',
  'not marked',
  '```',
  '<!-- check: quick-start/commands -->',
  '',
  '```bash',
  '# a comment',
  'npm init -y',
  '',
  'npx tsc && node main.js   # prints "10 of 20 buyers got one"',
  '```',
].join('\n');

describe('readme blocks', () => {
  it('finds the blocks marked just before their fence (a blank line between them or not), and no other', () => {
    const blocks = readmeBlocks(README);
    expect([...blocks.keys()]).toEqual(['quick-start/main.ts', 'quick-start/commands']);
    expect(blocks.get('quick-start/main.ts')).toEqual({ lang: 'ts', code: "console.log('hi');\n" });
  });

  it('names the marker a README lacks, and refuses a name marked twice', () => {
    expect(() => readmeBlock(readmeBlocks(README), 'backends/commands')).toThrow(
      '<!-- check: backends/commands -->',
    );
    const twice = `${README}\n<!-- check: quick-start/main.ts -->\n\`\`\`ts\nx\n\`\`\`\n`;
    expect(() => readmeBlocks(twice)).toThrow('two blocks "check: quick-start/main.ts"');
  });

  it('reads one command a line, with what it promises to print', () => {
    const code = readmeBlock(readmeBlocks(README), 'quick-start/commands');
    expect(readmeCommands(code)).toEqual([
      { command: 'npm init -y' },
      { command: 'npx tsc && node main.js', prints: '10 of 20 buyers got one' },
    ]);
  });
});
