export { OMClient, EventStream, DEFAULT_TOPICS } from "./client.js";
export { ContextAssembly, observationsOf, splitBlockKey } from "./assembly.js";
export { commandKey, eraseCommand } from "./erase.js";
export { MessagesApi } from "./messages-api.js";
export type { MessagesApiOptions } from "./messages-api.js";
export { progressCommand } from "./settled.js";
export type { EraseSubject } from "./erase.js";
export type { ClientOptions, EventEnvelope, EventType, MessageInput, Published, RecallArguments, Topics } from "./client.js";
export { ContractError, SCHEMA_NAMES, decode, encodeCanonical, normalDateTime, normalize, schemaOf, validate } from "./contract.js";
export type { ContractReason } from "./contract.js";
export { canonicalBytes, canonicalize } from "./jcs.js";
export { partitionFor } from "./partition.js";
export {
  TRACEPARENT, TRACESTATE, W3CTraceState, decodeContextRecord, formatTraceparent, injectTraceContext, parseTraceparent,
  parseTracestate, recordHeaders, spanContextFromHeaders, spanContextOf, traceContextOf,
} from "./tracing.js";
export type { RecordHeaders } from "./tracing.js";
export type * from "./generated/index.js";
export type {
  Author, FilePart, ImagePart, ReasoningPart, TextPart, ToolCallPart, ToolResultPart,
} from "./generated/om.message.v1.js";
