package stream_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/trawl-dev/trawl/stream"
)

// A run is written to its log and served from it; a client that comes
// back with Last-Event-ID gets only what followed.
func ExampleServe() {
	ctx := context.Background()
	log := stream.NewMemoryLog(stream.MemoryLogOptions{})
	_ = log.Open(ctx, "run-1")
	for _, c := range []stream.Chunk{
		stream.Start{},
		stream.TextStart{ID: "t1"},
		stream.TextDelta{ID: "t1", Delta: "All 3 pages read."},
		stream.TextEnd{ID: "t1"},
		stream.Finish{},
	} {
		_, _ = log.Append(ctx, "run-1", c)
	}
	_ = log.Close(ctx, "run-1")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = stream.Serve(w, r, log, "run-1", stream.ServeOptions{})
	}))
	defer srv.Close()

	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Last-Event-ID", "3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// id: 4
	// data: {"type":"text-end","id":"t1"}
	//
	// id: 5
	// data: {"type":"finish"}
	//
	// data: [DONE]
}

// Progress goes out at most once per 750 ms per tool call, each chunk
// replacing the previous one in the client's message.
func ExampleThrottle() {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	th := stream.NewThrottle(stream.ThrottleOptions{Now: func() time.Time { return now }})
	for page := 1; page <= 5; page++ {
		p := stream.Progress{
			ToolCallID: "call_1", ToolName: "list_orders", Page: page, PagesMax: 20,
			Items: 50 * page, Requests: page, RequestsMax: 60, ElapsedMs: int64(400 * (page - 1)),
		}
		if th.Allow(p.ToolCallID) {
			data, _ := stream.Encode(p.Chunk())
			fmt.Println(string(data))
		}
		now = now.Add(400 * time.Millisecond) // one page every 400 ms
	}
	// Output:
	// {"type":"data-tool-loop-progress","id":"call_1","data":{"toolCallId":"call_1","toolName":"list_orders","page":1,"pagesMax":20,"items":50,"requests":1,"requestsMax":60,"elapsedMs":0,"inFlight":0}}
	// {"type":"data-tool-loop-progress","id":"call_1","data":{"toolCallId":"call_1","toolName":"list_orders","page":3,"pagesMax":20,"items":150,"requests":3,"requestsMax":60,"elapsedMs":800,"inFlight":0}}
	// {"type":"data-tool-loop-progress","id":"call_1","data":{"toolCallId":"call_1","toolName":"list_orders","page":5,"pagesMax":20,"items":250,"requests":5,"requestsMax":60,"elapsedMs":1600,"inFlight":0}}
}
