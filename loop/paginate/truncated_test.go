package paginate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// A page the invoker cut at its byte cap is not read as a page: the first
// one fails the call saying so, a later one ends the walk as partial.
func TestWalkTruncatedPage(t *testing.T) {
	cut := func(page int) fakeCaller {
		return fakeCaller{call: func(_ context.Context, req tools.Request) (*tools.Response, error) {
			if req.Page < page {
				return &tools.Response{Status: 200, Body: []byte(`{"items":[{"id":` + string(rune('0'+req.Page)) + `}],"next_cursor":"c` + string(rune('0'+req.Page)) + `"}`)}, nil
			}
			return &tools.Response{Status: 200, Body: []byte(`{"items":[{"id":1},{"id":`), Truncated: true}, nil
		}}
	}
	opt := func(c fakeCaller) WalkOptions {
		return WalkOptions{Caller: c, Clock: NewFakeClock(epoch), Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true}
	}
	_, err := Walk(context.Background(), opt(cut(1)))
	var pe *PageError
	if !errors.As(err, &pe) || pe.StoppedBy != StopBudgetBytes || !strings.Contains(pe.Error(), "per-response cap") {
		t.Fatalf("first page cut: %v", err)
	}
	res, err := Walk(context.Background(), opt(cut(3)))
	if err != nil || res.Complete || res.StoppedBy != StopBudgetBytes || len(res.Items) != 2 {
		t.Fatalf("third page cut: %+v, %v", res, err)
	}
}
