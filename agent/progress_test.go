package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
)

// ProgressChunk carries the requests in flight and a rate limit's wait
// onto the stream, and leaves the wait out when there is none.
func TestProgressChunkCarriesInFlightAndTheRateLimit(t *testing.T) {
	for _, c := range []struct {
		p    paginate.Progress
		want string
	}{
		{paginate.Progress{Page: 4, PagesMax: 20, Items: 400, Requests: 6, RequestsMax: 60, InFlight: 2,
			Waiting: &paginate.RateLimitWait{Provider: "acme", Cause: "rate", Wait: 2 * time.Second}},
			`{"toolCallId":"call_1","toolName":"list_orders","page":4,"pagesMax":20,"items":400,"requests":6,"requestsMax":60,"elapsedMs":1500,"inFlight":2,"rateLimit":{"provider":"acme","cause":"rate","waitMs":2000}}`},
		{paginate.Progress{Page: 1, PagesMax: 20, Items: 50, Requests: 1, RequestsMax: 60},
			`{"toolCallId":"call_1","toolName":"list_orders","page":1,"pagesMax":20,"items":50,"requests":1,"requestsMax":60,"elapsedMs":1500,"inFlight":0}`},
	} {
		ch := ProgressChunk("call_1", "list_orders", loop.Progress{Progress: c.p}, 1500*time.Millisecond)
		got, err := json.Marshal(ch)
		if err != nil {
			t.Fatal(err)
		}
		var data struct{ Data json.RawMessage }
		if err := json.Unmarshal(got, &data); err != nil {
			t.Fatal(err)
		}
		if string(data.Data) != c.want {
			t.Errorf("chunk data\n got %s\nwant %s", data.Data, c.want)
		}
	}
}
