import type { MercuriusDriverConfig } from '@nestjs/mercurius';
import { defaultErrorFormatter } from 'mercurius';
import { redactCardNumbers } from '../card-numbers/card-number';
import { ProblemException } from './problem';

/** What a GraphQL client reads of a problem: the REST problem's code (upper case), status and extension members. */
export interface GraphQLProblemExtensions {
  code: string;
  status: number;
  /** Seconds before a retry, where the REST answer has Retry-After. */
  retryAfter?: number;
  [extension: string]: unknown;
}

/**
 * A problem of the app answered to a GraphQL client: the same code and detail
 * as its problem+json over REST, as a GraphQL error. graphql-js (under
 * Mercurius) copies an error's own `extensions` into the error it answers.
 */
export class GraphQLProblem extends Error {
  override name = 'GraphQLProblem';
  constructor(
    message: string,
    readonly extensions: GraphQLProblemExtensions,
  ) {
    super(message);
  }

  static of(problem: ProblemException): GraphQLProblem {
    const { type: _type, title: _title, detail, code, status, ...members } = problem.toBody();
    const retryAfter = problem.headers['Retry-After'];
    return new GraphQLProblem(detail, { ...members, code: code.toUpperCase(), status, ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}) });
  }
}

type ErrorFormatter = NonNullable<MercuriusDriverConfig['errorFormatter']>;

/**
 * Mercurius's own error formatter, with any card number in an error's message
 * redacted: graphql-js echoes input in its messages (an unknown field's name,
 * a value of the wrong type, a syntax error's token). The app's problems
 * (GraphQLProblem) come redacted already (ProblemDetailsFilter).
 */
export const redactingErrorFormatter: ErrorFormatter = (execution, context) => {
  const formatted = defaultErrorFormatter(execution, context);
  const errors = formatted.response.errors?.map((error) => ({ ...error, message: redactCardNumbers(error.message) }));
  return { ...formatted, response: { ...formatted.response, errors } };
};
