package omstream

// Fetching an om.context/v2 cursor's raw messages from the worker's HTTP API, for a cursor whose run the Client
// does not hold (it started after they were published): GET /v1/threads/{id}/messages?from=&through=, answered
// om.http.thread-messages/v1 by the worker that owns the thread, with the same bearer token as every /v1 call.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MessagesAPI is the worker's HTTP API, for the runs of messages a Client lacks (Config.MessagesAPI).
type MessagesAPI struct {
	BaseURL string        // the worker's API: http://worker:6066
	Token   string        // its OM_WORKER_API_TOKEN ("" when it has none)
	Timeout time.Duration // per request (default 10 s)
	Client  *http.Client  // default http.DefaultClient
}

// Run is the cursor's pin, then its run first..through, as the worker holds them.
func (api *MessagesAPI) Run(ctx context.Context, cursor *ContextCursor) ([]Message, error) {
	raw := cursor.Raw
	var wanted [][2]string
	if raw.PinnedMessageID != nil {
		wanted = append(wanted, [2]string{*raw.PinnedMessageID, *raw.PinnedMessageID})
	}
	if raw.FirstMessageID != nil && raw.ThroughMessageID != nil {
		wanted = append(wanted, [2]string{*raw.FirstMessageID, *raw.ThroughMessageID})
	}
	var out []Message
	for _, span := range wanted {
		fetched, err := api.fetch(ctx, cursor, span[0], span[1])
		if err != nil {
			return nil, err
		}
		out = append(out, fetched...)
	}
	return out, nil
}

func (api *MessagesAPI) fetch(ctx context.Context, cursor *ContextCursor, first, through string) ([]Message, error) {
	timeout := api.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	query := url.Values{"from": {first}, "through": {through}, "resource_id": {cursor.ResourceID}}
	address := strings.TrimRight(api.BaseURL, "/") + "/v1/threads/" + url.PathEscape(cursor.ThreadID) +
		"/messages?" + query.Encode()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return nil, err
	}
	if api.Token != "" {
		request.Header.Set("Authorization", "Bearer "+api.Token)
	}
	client := api.Client
	if client == nil {
		client = http.DefaultClient
	}
	response, err := client.Do(request)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		return nil, err
	}
	if response.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the messages API answered %d for a run of thread %s", response.StatusCode,
			cursor.ThreadID)
	}
	var answer ThreadMessages
	if err := Decode("om.http.thread-messages/v1", body, &answer); err != nil {
		return nil, err
	}
	return answer.Messages, nil
}
