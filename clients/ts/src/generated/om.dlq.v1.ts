/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.dlq/v1: topic om.dlq (output; key = the original key).
 */
export interface DeadLetterRecord {
  schema: "om.dlq/v1";
  /**
   * machine-readable: one of DLQ_REASONS
   */
  reason: string;
  detail: string;
  source_topic: string;
  source_partition: number;
  source_offset: number;
  /**
   * the original key bytes, base64
   */
  key_b64?: string | null;
  /**
   * the original value bytes, base64
   */
  value_b64: string;
  /**
   * original headers (value base64)
   */
  headers?: [unknown, unknown][];
  failed_at: string;
}
