/**
 * Compile-time checks of `@Locked` key templates: a type-level mirror of the parser in
 * `key-template.ts` and of the resolution in `placeholder.ts`, so the mistakes TypeScript can see
 * fail in the editor instead of at startup. Type-only: nothing here exists at run time, and the
 * run-time checks stay the authority (this file only repeats what it can).
 *
 * What the types can see, and so check:
 * - template syntax: an unclosed `{`, a stray `}`, an empty `{}`, two placeholders that touch;
 * - argument indices against the method's parameter list: `{2}` on a two-parameter method;
 * - property paths after an index, against the declared type of that argument:
 *   `{0.customer.idd}` when the type has no `idd`, and a path that ends on an object (`{0.at}` on a
 *   `Date`) where a key needs a string, number, bigint or boolean.
 *
 * What they cannot: parameter names. A function type keeps its parameters' types and positions,
 * never their names, so `{idd}` in `purchase(id: number)` is caught when the class is defined (at
 * startup, or when a test imports the file), not by the compiler. Write `{0}` / `{0.customer.id}`
 * where a compile-time check matters more than the name's readability. Arguments typed `any` or
 * `unknown`, templates that are not string literals, and paths through index signatures are not
 * checked either.
 */
import type {
  TYPE_PLACEHOLDER_BAD_VALUE,
  TYPE_PLACEHOLDER_EMPTY,
  TYPE_PLACEHOLDER_INDEX_PAST,
  TYPE_PLACEHOLDER_NO_PROPERTY,
  TYPE_PLACEHOLDERS_ADJACENT,
  TYPE_TEMPLATE_UNCLOSED,
  TYPE_TEMPLATE_UNOPENED,
} from './key.messages';

/** A problem found in a template, carried as a value of the type-level parse. */
interface TemplateProblem<M extends string> {
  readonly problem: M;
}

/** Whether literal text holds a `}` that is not part of a `}}` pair. */
type HasStrayClose<T extends string> = T extends `${infer A}}}${infer B}`
  ? A extends `${string}}${string}`
    ? true
    : HasStrayClose<B>
  : T extends `${string}}${string}`
    ? true
    : false;

/**
 * The placeholder expressions of one template, as a union, plus a `TemplateProblem` for its first
 * syntax error. `AfterPlaceholder`: the text being read follows a placeholder directly.
 */
type Parse<
  T extends string,
  Found extends string = never,
  AfterPlaceholder = false,
> = T extends `${infer Text}{${infer Rest}`
  ? HasStrayClose<Text> extends true
    ? TemplateProblem<TYPE_TEMPLATE_UNOPENED>
    : Rest extends `{${infer After}`
      ? Parse<After, Found> // `{{`: a literal brace, so the text is not empty
      : AfterPlaceholder extends true
        ? Text extends ''
          ? TemplateProblem<TYPE_PLACEHOLDERS_ADJACENT>
          : ParsePlaceholder<Rest, Found>
        : ParsePlaceholder<Rest, Found>
  : HasStrayClose<T> extends true
    ? TemplateProblem<TYPE_TEMPLATE_UNOPENED>
    : Found;

type ParsePlaceholder<
  Rest extends string,
  Found extends string,
> = Rest extends `${infer Expr}}${infer After}`
  ? Expr extends `${string}{${string}`
    ? TemplateProblem<TYPE_TEMPLATE_UNCLOSED>
    : Expr extends ''
      ? TemplateProblem<TYPE_PLACEHOLDER_EMPTY>
      : Parse<After, Found | Expr, true>
  : TemplateProblem<TYPE_TEMPLATE_UNCLOSED>;

type Digit = '0' | '1' | '2' | '3' | '4' | '5' | '6' | '7' | '8' | '9';
type AllDigits<S extends string> = S extends ''
  ? true
  : S extends `${Digit}${infer R}`
    ? AllDigits<R>
    : false;
/** An argument index as the run time reads one: `0`, or digits without a leading zero. */
type IsIndex<S extends string> = S extends '0'
  ? true
  : S extends `${Exclude<Digit, '0'>}${infer R}`
    ? AllDigits<R>
    : false;

/** What a placeholder may render: everything else fails the call. */
type KeyValue = string | number | bigint | boolean;

/** Arrays of unknown length: any index may exist. */
type IndexesOpenArray<V, S extends string> =
  IsIndex<S> extends true
    ? V extends readonly unknown[]
      ? number extends V['length']
        ? true
        : never
      : never
    : never;
/** `true` if some member of the union `V` has the property `S` (never if none has). */
type HasProperty<V, S extends string> = V extends unknown
  ? S extends keyof V
    ? true
    : IndexesOpenArray<V, S>
  : never;
/** The type of property `S` over the members of `V` that have it. */
type PropertyOf<V, S extends string> = V extends unknown
  ? S extends keyof V
    ? V[S]
    : V extends readonly (infer E)[]
      ? IndexesOpenArray<V, S> extends true
        ? E
        : never
      : never
  : never;

/** Follows a dot path from a value of type `V`; a `TemplateProblem` where it breaks. */
type WalkPath<V, Path extends string, Expr extends string, Read extends string> = unknown extends V // any or unknown: nothing to check against
  ? never
  : Path extends ''
    ? [Extract<V, KeyValue>] extends [never]
      ? TemplateProblem<TYPE_PLACEHOLDER_BAD_VALUE<Expr>>
      : never
    : Path extends `${infer S}.${infer R}`
      ? Step<NonNullable<V>, S, R, Expr, Read>
      : Step<NonNullable<V>, Path, '', Expr, Read>;
type Step<V, S extends string, R extends string, Expr extends string, Read extends string> = [
  HasProperty<V, S>,
] extends [never]
  ? TemplateProblem<TYPE_PLACEHOLDER_NO_PROPERTY<Expr, Read, S>>
  : WalkPath<PropertyOf<V, S>, R, Expr, `${Read}.${S}`>;

/** Checks one placeholder against the parameter tuple `P`: only index heads can be checked. */
type CheckPlaceholder<
  Expr extends string,
  P extends readonly unknown[],
> = Expr extends `${infer H}.${infer R}` ? CheckHead<H, R, Expr, P> : CheckHead<Expr, '', Expr, P>;
type CheckHead<
  H extends string,
  R extends string,
  Expr extends string,
  P extends readonly unknown[],
> =
  IsIndex<H> extends true
    ? H extends keyof P
      ? WalkPath<P[H], R, Expr, H>
      : number extends P['length']
        ? WalkPath<P[number], R, Expr, H>
        : TemplateProblem<TYPE_PLACEHOLDER_INDEX_PAST<Expr, H, P['length']>>
    : never; // a parameter name: checked when the class is defined

/** Parse results of a template or of every template of an array. */
type ParseKeys<K> = K extends string
  ? Parse<K>
  : K extends readonly (infer E extends string)[]
    ? Parse<E>
    : never;

type Problems<X> = X extends TemplateProblem<infer M> ? M : never;

/**
 * The type `@Locked` asks its key argument to have: the argument itself when its templates parse,
 * otherwise the message of the first problem (which TypeScript shows as "Argument of type
 * '"x:{id"' is not assignable to parameter of type '"@Locked template: ..."'").
 */
export type CheckedKeys<K> = string extends K
  ? K
  : [Problems<ParseKeys<K>>] extends [never]
    ? K
    : `@Locked template: ${Problems<ParseKeys<K>>}`;

/**
 * The problems (as messages) of the index placeholders of `K` against the parameter tuple `P`;
 * `never` when there are none or `K` is not made of string literals.
 */
export type PlaceholderProblems<K, P extends readonly unknown[]> = string extends K
  ? never
  : Problems<
      Exclude<ParseKeys<K>, TemplateProblem<string>> extends infer Expr extends string
        ? Expr extends unknown
          ? CheckPlaceholder<Expr, P>
          : never
        : never
    >;
