/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.erasure-status/v1: GET /v1/erasures/{id}; DELETE /v1/threads/{id} or /v1/resources/{id} with wait_s, once done.
 *
 * ``GET /v1/erasures/{id}`` (and ``DELETE ...?wait_s=N`` once done): ``done`` with what it removed, or
 * ``running``. Counts only, never an id of the subject.
 */
export interface ErasureStatus {
  erase_id: string;
  state: "running" | "done";
  found?: boolean | null;
  removed?: {
    [k: string]: number | undefined;
  } | null;
  completed_at?: string | null;
}
