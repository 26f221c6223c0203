import { LockKeyError } from '../errors';
import {
  KEY_BROKEN_PATH,
  KEY_INDEX_OUT_OF_RANGE,
  KEY_PATH_THREW,
  KEY_PLACEHOLDER_SYNTAX,
  KEY_PLACEHOLDER_WHITESPACE,
  KEY_REST_PLACEHOLDER,
  KEY_UNKNOWN_PARAMETER,
} from './key.messages';
import type { ParamNames } from './param-names';

/** Reads one placeholder's raw value from the call's arguments. */
type Accessor = (args: readonly unknown[]) => unknown;

const INDEX = /^(?:0|[1-9][0-9]*)$/;
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$\u200C\u200D]*$/u;
const WHITESPACE = /\s/;

/** Resolves `{expr}` against the parameter list into an accessor, failing at decoration time. */
export function compilePlaceholder(
  template: string,
  where: string,
  expr: string,
  getParams: () => ParamNames,
): Accessor {
  if (WHITESPACE.test(expr)) {
    throw new LockKeyError(KEY_PLACEHOLDER_WHITESPACE(template, where, expr), template, expr);
  }
  const segments = expr.split('.');
  const [head] = segments;
  if (!segments.every((s) => INDEX.test(s) || IDENTIFIER.test(s)))
    throw new LockKeyError(KEY_PLACEHOLDER_SYNTAX(template, where, expr), template, expr);

  const { names, rest } = getParams();
  const restAt = rest ? names.length - 1 : -1;
  let index: number;
  let pathFrom = 1; // segments[pathFrom..] are read as properties
  let fromRest = false;
  if (INDEX.test(head)) {
    index = Number(head);
    if (!rest && index >= names.length) {
      throw new LockKeyError(
        KEY_INDEX_OUT_OF_RANGE(template, where, expr, index, names),
        template,
        expr,
      );
    }
  } else {
    index = names.indexOf(head);
    if (index < 0) {
      throw new LockKeyError(
        KEY_UNKNOWN_PARAMETER(template, where, expr, names, rest),
        template,
        expr,
      );
    }
    if (index === restAt) {
      if (segments.length === 1) {
        throw new LockKeyError(KEY_REST_PLACEHOLDER(template, where, expr), template, expr);
      }
      if (INDEX.test(segments[1])) {
        // {args.2} is argument restAt + 2: read it directly instead of slicing per call.
        index = restAt + Number(segments[1]);
        pathFrom = 2;
      } else {
        fromRest = true; // e.g. {args.length}
      }
    }
  }

  const path = segments.slice(pathFrom);
  // labels[k]: how the value holding path[k] is written in the placeholder (for messages).
  const labels = path.map((_, k) => segments.slice(0, pathFrom + k).join('.'));
  const at = index;
  const start: Accessor = fromRest ? (args) => args.slice(at) : (args) => args[at];
  if (path.length === 0) return start;

  return (args) => {
    let value = start(args);
    for (let k = 0; k < path.length; k++) {
      if (value === undefined || value === null) {
        throw new LockKeyError(
          KEY_BROKEN_PATH(template, where, expr, labels[k], value),
          template,
          expr,
        );
      }
      try {
        value = (value as Record<string, unknown>)[path[k]];
      } catch (error) {
        const label = `${labels[k]}.${path[k]}`;
        const message = KEY_PATH_THREW(template, where, expr, label, error);
        throw new LockKeyError(message, template, expr, error);
      }
    }
    return value;
  };
}
