import { classTemplate, LockClasses } from '../../lib/lock-order/lock-class';

/** Lock classes (lib/lock-order/lock-class.ts): a template's class, interning, the raw-key bound. */
describe('classTemplate', () => {
  it.each([
    ['account:{id}', 'account:{}'],
    ['account:{from}', 'account:{}'],
    ['order:{dto.customer.id}:{0.items.2.sku}', 'order:{}:{}'],
    ['literal:{{x}}:{y}', 'literal:{{x}}:{}'],
    ['plain:key', 'plain:key'],
  ])('%s -> %s', (template, expected) => expect(classTemplate(template)).toBe(expected));
});

describe('LockClasses', () => {
  it('interns a class per group, mode and template, and a set per class combination', () => {
    const classes = new LockClasses();
    const a = classes.get('default', 'exclusive', 'a:{}');
    expect(classes.get('default', 'exclusive', 'a:{}')).toBe(a);
    expect(classes.get('default', 'read', 'a:{}')).not.toBe(a);
    expect(classes.get('jobs', 'exclusive', 'a:{}').label).toBe('a:{}/exclusive [jobs]');
    const b = classes.get('default', 'exclusive', 'b:{}');
    expect(classes.set([b, a])).toBe(classes.set([a, b, a]));
    expect(classes.set([a, a])).toBe(a.alone);
  });

  it('gives at most the limit of raw keys a class of their own; those keep theirs', () => {
    const classes = new LockClasses(2);
    const one = classes.rawClass('default', 'exclusive', 'order:1');
    expect(classes.rawClass('default', 'exclusive', 'order:2')).toBeDefined();
    expect(classes.rawFull).toBe(true);
    expect(classes.rawClass('default', 'exclusive', 'order:3')).toBeUndefined();
    expect(classes.rawClass('default', 'exclusive', 'order:1')).toBe(one);
    // Templates and named classes are never bounded: they are few by nature.
    expect(classes.get('default', 'exclusive', 'order:{}')).toBeDefined();
  });
});
