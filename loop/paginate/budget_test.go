package paginate

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBudgetResolved(t *testing.T) {
	want := Budget{Pages: 20, Requests: 60, Items: 5000, Bytes: 24 << 20, Time: 60 * time.Second, ForEachValues: 50}
	if diff := cmp.Diff(want, Budget{}.Resolved()); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	got := Budget{Pages: 3, Time: time.Second}.Resolved()
	if got.Pages != 3 || got.Time != time.Second || got.Requests != 60 {
		t.Errorf("Resolved kept %+v", got)
	}
}

// Overrides apply deployment first, then binding; zero fields keep what
// was there.
func TestBudgetMerge(t *testing.T) {
	deployment := Budget{Pages: 50, Requests: 200, Time: 2 * time.Minute}
	binding := Budget{Pages: 10, Items: 1000}
	got := Budget{}.Merge(deployment).Merge(binding).Resolved()
	want := Budget{Pages: 10, Requests: 200, Items: 1000, Bytes: 24 << 20, Time: 2 * time.Minute, ForEachValues: 50}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}

func TestBudgetValidate(t *testing.T) {
	for _, b := range []Budget{{Pages: -1}, {Requests: -1}, {Items: -1}, {Bytes: -1}, {Time: -time.Second}, {ForEachValues: -1}} {
		if err := b.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", b)
		}
	}
	if err := (Budget{}).Validate(); err != nil {
		t.Errorf("Validate(zero) = %v", err)
	}
}

func TestMeterConcurrent(t *testing.T) {
	m := NewMeter(epoch)
	var wg sync.WaitGroup
	var granted sync.Map
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if m.takeRequest(100) {
					granted.Store(i*1000+j, true)
				}
				m.addItems(1)
				m.addBytes(10)
			}
		}()
	}
	wg.Wait()
	n := 0
	granted.Range(func(any, any) bool { n++; return true })
	want := Usage{Start: epoch, Requests: 100, Items: 400, Bytes: 4000}
	if diff := cmp.Diff(want, m.Usage()); diff != "" || n != 100 {
		t.Errorf("usage (-want +got):\n%s; %d requests granted, want 100", diff, n)
	}
}
