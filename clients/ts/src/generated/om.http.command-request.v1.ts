/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.command-request/v1: body of POST /v1/threads/{id}/observe|reflect|override.
 *
 * Body of ``POST /v1/threads/{id}/observe``, ``.../reflect`` and ``.../override`` (an empty body means
 * ``{}``). ``force`` is for observe only, ``guidance`` for reflect only, the token counts, ``retention_days``
 * and ``replace`` for override only; ``resource_id`` is needed in resource scope.
 */
export interface CommandRequest {
  resource_id?: string | null;
  guidance?: string | null;
  force?: boolean | null;
  message_tokens?: number | null;
  observation_tokens?: number | null;
  retention_days?: number | null;
  replace?: boolean | null;
}
