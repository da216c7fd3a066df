package tools

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLearnReadsTheRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	in := func(d time.Duration) time.Time { return now.Add(d) }
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   Learned
	}{
		{"plain success", 200, h(), Learned{OK: true, Remaining: -1}},
		{"transport failure teaches nothing", 0, h("Retry-After", "5"), Learned{Remaining: -1}},
		{"429 with Retry-After seconds", 429, h("Retry-After", "7"), Learned{TooMany: true, PauseUntil: in(7 * time.Second), Remaining: -1}},
		{"503 with an HTTP-date", 503, h("Retry-After", in(90*time.Second).Format(http.TimeFormat)), Learned{PauseUntil: in(90 * time.Second), Remaining: -1}},
		{"Retry-After on a 200 is not a pause", 200, h("Retry-After", "7"), Learned{OK: true, Remaining: -1}},
		{"GitHub: epoch seconds", 200, h("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(in(42*time.Second).Unix(), 10)),
			Learned{OK: true, Remaining: 0, Reset: in(42 * time.Second)}},
		{"delta seconds", 200, h("X-RateLimit-Remaining", "12", "X-RateLimit-Reset", "30"), Learned{OK: true, Remaining: 12, Reset: in(30 * time.Second)}},
		{"epoch milliseconds", 200, h("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", strconv.FormatInt(in(5*time.Second).UnixMilli(), 10)),
			Learned{OK: true, Remaining: 3, Reset: in(5 * time.Second)}},
		{"Discord's Reset-After", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "1.5"), Learned{OK: true, Remaining: 0, Reset: in(1500 * time.Millisecond)}},
		{"remaining without a reset says nothing", 200, h("X-RateLimit-Remaining", "0"), Learned{OK: true, Remaining: -1}},
		{"a reset in the past says nothing", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(in(-time.Minute).Unix(), 10)), Learned{OK: true, Remaining: -1}},
		{"IETF structured fields", 200, h("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`, "RateLimit", `"burst";r=40;t=20, "daily";r=900;t=3600`),
			Learned{OK: true, Remaining: 40, Reset: in(20 * time.Second), Rate: 1000.0 / 86400, Burst: 100}},
		{"several policies: the lowest rate and the lowest quota", 200, h("RateLimit-Policy", `"burst";q=10;w=1, "day";q=10000;w=86400`),
			Learned{OK: true, Remaining: -1, Rate: 10000.0 / 86400, Burst: 10}},
		{"a policy window past a year says nothing", 200, h("RateLimit-Policy", `"a";q=1;w=1e12`), Learned{OK: true, Remaining: -1}},
		{"a reset in epoch microseconds says nothing", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(in(5*time.Second).UnixMicro(), 10)),
			Learned{OK: true, Remaining: -1}},
		{"an epoch reset past a year says nothing", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999999"), Learned{OK: true, Remaining: -1}},
		{"an epoch-seconds reset past a year says nothing", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(in(400*24*time.Hour).Unix(), 10)),
			Learned{OK: true, Remaining: -1}},
		{"an HTTP-date reset", 200, h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", in(30*time.Second).Format(http.TimeFormat)),
			Learned{OK: true, Remaining: 0, Reset: in(30 * time.Second)}},
		{"IETF older draft", 200, h("RateLimit-Limit", "100", "RateLimit-Remaining", "0", "RateLimit-Reset", "9", "RateLimit-Policy", "100;w=50"),
			Learned{OK: true, Remaining: 0, Reset: in(9 * time.Second), Rate: 2, Burst: 100}},
		{"IETF draft list form", 200, h("RateLimit", "limit=10, remaining=4, reset=3"), Learned{OK: true, Remaining: 4, Reset: in(3 * time.Second)}},
		{"garbage is ignored", 429, h("Retry-After", "soon", "X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "x", "RateLimit-Policy", "q=;w=0", "RateLimit", `"a";r=x`),
			Learned{TooMany: true, Remaining: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Learn(Outcome{Status: tc.status, Header: tc.header}, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Learn (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRateLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		rl      RateLimit
		wantErr bool
	}{
		{RateLimit{}, false},
		{RateLimit{RequestsPerSecond: 5, Burst: 10, Concurrency: 2}, false},
		{RateLimit{RequestsPerSecond: -1}, true},
		{RateLimit{Burst: 3}, true},
		{RateLimit{Concurrency: -2}, true},
	} {
		if err := tc.rl.Validate(); (err != nil) != tc.wantErr {
			t.Errorf("%+v: err = %v", tc.rl, err)
		}
	}
	if got := (RateLimit{RequestsPerSecond: 2.5}).BurstOrDefault(); got != 1 {
		t.Errorf("default burst of 2.5/s = %d, want 1", got)
	}
}
func TestRetryAfter(t *testing.T) {
	epoch := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{" 0 ", 0, true},
		{"-3", 0, false},
		{"soon", 0, false},
		{epoch.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{epoch.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999", 24 * time.Hour, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"1e30", 24 * time.Hour, true},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.value != "" {
			h.Set("Retry-After", c.value)
		}
		got, ok := RetryAfter(h, epoch)
		if got != c.want || ok != c.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", c.value, got, ok, c.want, c.ok)
		}
	}
}

func TestSystemClockSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SystemClock().Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep = %v, want context.Canceled at once", err)
	}
	if err := SystemClock().Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
}
