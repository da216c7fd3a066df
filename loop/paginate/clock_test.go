package paginate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFakeClock(t *testing.T) {
	c := NewFakeClock(epoch)
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if got, want := c.Now(), epoch.Add(63*time.Second); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
	if diff := cmp.Diff([]time.Duration{3 * time.Second}, c.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
}
