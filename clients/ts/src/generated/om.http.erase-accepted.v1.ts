/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.erase-accepted/v1: 202 answer of DELETE /v1/threads/{id} and DELETE /v1/resources/{id}.
 *
 * ``202`` answer of ``DELETE /v1/threads/{id}`` and ``/v1/resources/{id}``: the erase was queued on the
 * commands topic under ``erase_id``; ``status`` is where to ask how it went (its receipt is also a
 * ``data-om-erased`` event).
 */
export interface EraseAccepted {
  accepted: true;
  erase_id: string;
  status: string;
}
