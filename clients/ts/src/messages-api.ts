/**
 * Fetching an `om.context/v2` cursor's raw messages from the worker's HTTP API, for a cursor whose run the client
 * does not hold (it started after they were published): `GET /v1/threads/{id}/messages?from=&through=`, answered
 * `om.http.thread-messages/v1` by the worker that owns the thread, with the same bearer token as every `/v1` call.
 */
import type { ThreadMessage } from "./assembly.js";
import { decode } from "./contract.js";
import type { ContextCursor } from "./generated/om.context.v2.js";

export interface MessagesApiOptions {
  /** The worker's API: `http://worker:6066`. */
  baseUrl: string;
  /** Its `OM_WORKER_API_TOKEN`, when it has one. */
  token?: string;
  /** Per request (default 10 s). */
  timeoutMs?: number;
}

export class MessagesApi {
  private readonly baseUrl: string;

  constructor(private readonly options: MessagesApiOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
  }

  /** The cursor's pin, then its run `first`..`through`, as the worker holds them; rejects when it cannot answer. */
  async run(cursor: ContextCursor): Promise<ThreadMessage[]> {
    const raw = cursor.raw;
    const wanted: [string, string][] = [];
    if (raw.pinned_message_id != null) wanted.push([raw.pinned_message_id, raw.pinned_message_id]);
    if (raw.first_message_id != null && raw.through_message_id != null) {
      wanted.push([raw.first_message_id, raw.through_message_id]);
    }
    const out: ThreadMessage[] = [];
    for (const [first, through] of wanted) out.push(...await this.fetchRun(cursor, first, through));
    return out;
  }

  private async fetchRun(cursor: ContextCursor, first: string, through: string): Promise<ThreadMessage[]> {
    const query = new URLSearchParams({ from: first, through, resource_id: cursor.resource_id });
    const url = `${this.baseUrl}/v1/threads/${encodeURIComponent(cursor.thread_id)}/messages?${query.toString()}`;
    const response = await fetch(url, {
      headers: this.options.token === undefined ? {} : { Authorization: `Bearer ${this.options.token}` },
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 10_000),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    if (response.status !== 200) {
      throw new Error(`the messages API answered ${response.status} for a run of thread ${cursor.thread_id}`);
    }
    return decode("om.http.thread-messages/v1", body).messages as ThreadMessage[];
  }
}
