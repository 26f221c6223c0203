import { DescribedFailure } from '../../errors/failure-hint';
import { nodeName, type RedisNode } from './redis-node';
import { REDIS_PASSWORD_MISSING, REDIS_WRONG_PASSWORD } from './redis.messages';

/**
 * A connection error of `node` that says what to fix when Redis refused to authenticate: a wrong
 * user or password (WRONGPASS), or none given to a server that wants one (NOAUTH, whatever
 * command Redis names in it), described with the `auth` hint every backend gives. Any other error
 * is returned as it is. The driver's text stays in the message and the original error is the
 * `cause`.
 * @internal
 */
export function explainAuthFailure(node: RedisNode, error: Error): Error {
  const { message } = error;
  if (message.startsWith('WRONGPASS')) {
    return new DescribedFailure(REDIS_WRONG_PASSWORD(nodeName(node), message), 'auth', error);
  }
  if (message.startsWith('NOAUTH')) {
    return new DescribedFailure(REDIS_PASSWORD_MISSING(nodeName(node), message), 'auth', error);
  }
  return error;
}
