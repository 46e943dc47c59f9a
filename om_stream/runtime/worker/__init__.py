"""``om-stream worker``: the Faust app next to the user's Kafka (memory agent, model workers, timers, HTTP)."""
