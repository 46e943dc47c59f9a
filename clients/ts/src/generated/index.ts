/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

import type { MessageRecord } from "./om.message.v1.js";
export type { MessageRecord };
import type { CommandRecord } from "./om.command.v1.js";
export type { CommandRecord };
import type { ContextRecord } from "./om.context.v1.js";
export type { ContextRecord };
import type { DeadLetterRecord } from "./om.dlq.v1.js";
export type { DeadLetterRecord };
import type { RecallRequest } from "./om.recall.request.v1.js";
export type { RecallRequest };
import type { RecallResponse } from "./om.recall.response.v1.js";
export type { RecallResponse };
import type { ActivationEvent } from "./data-om-activation.v1.js";
export type { ActivationEvent };
import type { BufferingEndEvent } from "./data-om-buffering-end.v1.js";
export type { BufferingEndEvent };
import type { BufferingFailedEvent } from "./data-om-buffering-failed.v1.js";
export type { BufferingFailedEvent };
import type { BufferingStartEvent } from "./data-om-buffering-start.v1.js";
export type { BufferingStartEvent };
import type { CondensationEvent } from "./data-om-condensation.v1.js";
export type { CondensationEvent };
import type { ErasedEvent } from "./data-om-erased.v1.js";
export type { ErasedEvent };
import type { ObservationEndEvent } from "./data-om-observation-end.v1.js";
export type { ObservationEndEvent };
import type { ObservationFailedEvent } from "./data-om-observation-failed.v1.js";
export type { ObservationFailedEvent };
import type { ObservationStartEvent } from "./data-om-observation-start.v1.js";
export type { ObservationStartEvent };
import type { StatusEvent } from "./data-om-status.v1.js";
export type { StatusEvent };
import type { TemporalMarkerEvent } from "./data-om-temporal-marker.v1.js";
export type { TemporalMarkerEvent };
import type { ThreadUpdateEvent } from "./data-om-thread-update.v1.js";
export type { ThreadUpdateEvent };
import type { CommandRequest } from "./om.http.command-request.v1.js";
export type { CommandRequest };
import type { CommandAccepted } from "./om.http.command-accepted.v1.js";
export type { CommandAccepted };
import type { EraseAccepted } from "./om.http.erase-accepted.v1.js";
export type { EraseAccepted };
import type { ErasureStatus } from "./om.http.erasure-status.v1.js";
export type { ErasureStatus };
import type { HttpError } from "./om.http.error.v1.js";
export type { HttpError };

/** Every published payload type, by schema name. */
export interface Payloads {
  "om.message/v1": MessageRecord;
  "om.command/v1": CommandRecord;
  "om.context/v1": ContextRecord;
  "om.dlq/v1": DeadLetterRecord;
  "om.recall.request/v1": RecallRequest;
  "om.recall.response/v1": RecallResponse;
  "data-om-activation/v1": ActivationEvent;
  "data-om-buffering-end/v1": BufferingEndEvent;
  "data-om-buffering-failed/v1": BufferingFailedEvent;
  "data-om-buffering-start/v1": BufferingStartEvent;
  "data-om-condensation/v1": CondensationEvent;
  "data-om-erased/v1": ErasedEvent;
  "data-om-observation-end/v1": ObservationEndEvent;
  "data-om-observation-failed/v1": ObservationFailedEvent;
  "data-om-observation-start/v1": ObservationStartEvent;
  "data-om-status/v1": StatusEvent;
  "data-om-temporal-marker/v1": TemporalMarkerEvent;
  "data-om-thread-update/v1": ThreadUpdateEvent;
  "om.http.command-request/v1": CommandRequest;
  "om.http.command-accepted/v1": CommandAccepted;
  "om.http.erase-accepted/v1": EraseAccepted;
  "om.http.erasure-status/v1": ErasureStatus;
  "om.http.error/v1": HttpError;
}

export type SchemaName = keyof Payloads;
