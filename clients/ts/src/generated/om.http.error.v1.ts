/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.error/v1: 4xx answers of the HTTP API.
 *
 * ``4xx`` answers: ``not_found`` (the thread is not held by this worker: read the context topic instead; for
 * an override, also: no message reached the thread), ``invalid_json`` or ``invalid_fields`` (``detail`` lists
 * the problems).
 */
export interface HttpError {
  error: "not_found" | "invalid_json" | "invalid_fields";
  detail?: string | HttpFieldProblem[] | null;
}
export interface HttpFieldProblem {
  loc: (string | number)[];
  msg: string;
}
