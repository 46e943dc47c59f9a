// What the Python drivers of the end-to-end suites (clients/test_clients_e2e.py, clients/test_clients_tracing.py)
// pass in the environment: the broker and the worker's own OM_KAFKA_TOPIC_* names.
import type { Topics } from "../src/index.js";

export function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through clients/test_clients_e2e.py or test_clients_tracing.py`);
  return value;
}

/** The worker's topics as the client names them. */
export function topicsFromEnv(): Partial<Topics> {
  return {
    messages: env("OM_KAFKA_TOPIC_MESSAGES"), commands: env("OM_KAFKA_TOPIC_COMMANDS"),
    events: env("OM_KAFKA_TOPIC_EVENTS"), context: env("OM_KAFKA_TOPIC_CONTEXT"),
    recallRequests: env("OM_KAFKA_TOPIC_RECALL_REQUESTS"), recallResponses: env("OM_KAFKA_TOPIC_RECALL_RESPONSES"),
  };
}
