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
				if m.takeRequest(100, nil, 0) {
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

// A lease protects a walk's requests from the walks beside it: others
// see them as spent, the holder spends them first, and Release gives
// back the rest.
func TestMeterLease(t *testing.T) {
	m := NewMeter(epoch)
	l, ok := m.Reserve(4, 10)
	if !ok || l.held() != 4 || m.Free(10) != 6 {
		t.Fatalf("Reserve(4, 10) = %v, held %d, free %d", ok, l.held(), m.Free(10))
	}
	for range 6 {
		if !m.takeRequest(10, nil, 0) {
			t.Fatal("a free request was refused")
		}
	}
	if m.takeRequest(10, nil, 0) {
		t.Error("a walk without the lease spent a leased request")
	}
	if !m.takeRequest(10, l, 0) || l.held() != 3 {
		t.Errorf("the holder could not spend its lease (held %d)", l.held())
	}
	// keep: requests kept for a probe are not spent by pages.
	if !m.takeRequest(10, l, 2) || m.takeRequest(10, l, 2) {
		t.Errorf("keep 2 of 3: want one page request, then none (held %d)", l.held())
	}
	if got := m.room(10, l); got != 2 {
		t.Errorf("room = %d, want the 2 kept", got)
	}
	l.Release()
	l.Release()
	if u := m.Usage(); u.Requests != 8 || u.Held != 0 || m.Free(10) != 2 {
		t.Errorf("after Release: %+v, free %d; want 8 spent, none held, 2 free", u, m.Free(10))
	}
	if _, ok := m.Reserve(5, 8); ok {
		t.Error("Reserve succeeded on a spent budget")
	}
	if l2, ok := m.Reserve(5, 10); !ok || l2.held() != 2 {
		t.Errorf("Reserve(5) with 2 free: %v, want a lease of 2", ok)
	}
}
