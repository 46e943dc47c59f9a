/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.command-request/v1: body of POST /v1/threads/{id}/observe|reflect.
 *
 * Body of ``POST /v1/threads/{id}/observe`` and ``.../reflect`` (an empty body means ``{}``). ``guidance``
 * is for reflect only; ``resource_id`` is needed in resource scope.
 */
export interface CommandRequest {
  resource_id?: string | null;
  guidance?: string | null;
}
