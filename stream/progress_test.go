package stream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestThrottle(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleOptions{Now: clock.Now})

	// Each step: advance the clock, then ask for these keys.
	type step struct {
		advance time.Duration
		keys    []string
		want    []bool
	}
	for i, s := range []step{
		{0, []string{"a", "b", "a"}, []bool{true, true, false}},
		{300 * time.Millisecond, []string{"a", "b"}, []bool{false, false}},
		{449 * time.Millisecond, []string{"a"}, []bool{false}}, // 749 ms after the first
		{time.Millisecond, []string{"a", "a", "b"}, []bool{true, false, true}},
		{700 * time.Millisecond, []string{"a", "c"}, []bool{false, true}},
		{50 * time.Millisecond, []string{"a", "b", "c"}, []bool{true, true, false}},
		{10 * time.Second, []string{"a", "b", "c"}, []bool{true, true, true}},
	} {
		clock.Advance(s.advance)
		var got []bool
		for _, k := range s.keys {
			got = append(got, th.Allow(k))
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d %v (-want +got):\n%s", i, s.keys, diff)
		}
	}

	th.Forget("a")
	if !th.Allow("a") {
		t.Error("a forgotten key was throttled")
	}
	if th.Allow("b") {
		t.Error("forgetting one key forgot another")
	}
}

func TestThrottleInterval(t *testing.T) {
	clock := newFakeClock()
	th := NewThrottle(ThrottleOptions{Interval: time.Second, Now: clock.Now})
	th.Allow("a")
	clock.Advance(999 * time.Millisecond)
	if th.Allow("a") {
		t.Error("allowed before the interval")
	}
	clock.Advance(time.Millisecond)
	if !th.Allow("a") {
		t.Error("throttled at the interval")
	}
}

// TestThrottleConcurrent: parallel tool calls share one Throttle; with a
// clock that does not move, each key gets exactly one event through.
func TestThrottleConcurrent(t *testing.T) {
	th := NewThrottle(ThrottleOptions{Now: newFakeClock().Now})
	var mu sync.Mutex
	allowed := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				key := fmt.Sprint("call_", (g+i)%4)
				if th.Allow(key) {
					mu.Lock()
					allowed[key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	want := map[string]int{"call_0": 1, "call_1": 1, "call_2": 1, "call_3": 1}
	if diff := cmp.Diff(want, allowed); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// ProgressOf reads a progress chunk as the producer made it and as
// ParseChunk reads it off the wire, alike; any other data chunk is not
// one.
func TestProgressOf(t *testing.T) {
	p := Progress{ToolCallID: "c1", ToolName: "acme.list", Page: 2, PagesMax: 20, Items: 150, Requests: 3, RequestsMax: 60,
		ElapsedMs: 420, Total: 364, ForEach: &ForEachProgress{Key: "id", Value: "p7", Index: 1, Total: 4}}
	enc, err := Encode(p.Chunk())
	if err != nil {
		t.Fatal(err)
	}
	wire, err := ParseChunk(enc)
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]Data{"made": p.Chunk(), "read": wire.(Data)} {
		got, ok := ProgressOf(d)
		if !ok {
			t.Errorf("%s: not a progress", name)
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	for _, d := range []Data{{Name: "other", Data: p}, {Name: ProgressName, Data: "a string"}} {
		if _, ok := ProgressOf(d); ok {
			t.Errorf("%+v is read as a progress", d)
		}
	}
}
