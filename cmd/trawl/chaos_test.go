package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
)

// TestChaos: turns of three steps (the eight-page walk, a write, the
// answer) on two replicas on one Redis while a seeded killer SIGKILLs a
// random replica every few seconds (bounded: one dead at a time, started
// again a second later). Each client follows its turn wherever it goes —
// a broken stream is resumed on a live replica after its last event —
// until [DONE]. Every turn ends with finish, or (a poison turn) one
// error; the event ids a client reads run 1, 2, 3… with no gap or
// repeat; no write reaches the upstream twice; each thread holds each
// step once. TRAWL_CHAOS_TURNS sets the number of turns (200 for the
// figures in bench/README.md; default 20, none with -short);
// TRAWL_CHAOS_SEED the seed.
func TestChaos(t *testing.T) {
	turns := 20
	if v := os.Getenv("TRAWL_CHAOS_TURNS"); v != "" {
		turns, _ = strconv.Atoi(v)
	} else if testing.Short() {
		t.Skip("-short: the chaos test runs real processes for a while")
	}
	seed := uint64(29)
	if v := os.Getenv("TRAWL_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	bin := buildTrawl(t)
	rs := redistest.Start(t)
	up := newDurableUpstream(t)
	// The walk is made once (then the dataset cache serves it): the
	// answer, in slow deltas, keeps each turn running some seconds.
	model := newFakeModel(t, 250*time.Millisecond)
	cfgs, addrs := durableReplicas(t, 2, up.URL, model.URL, rs.Addr, "chaos:", 0)

	var mu sync.Mutex // guards procs
	procs := []*process{startTrawl(t, bin, cfgs[0], addrs[0]), startTrawl(t, bin, cfgs[1], addrs[1])}
	alive := func(rng *rand.Rand) *process {
		mu.Lock()
		defer mu.Unlock()
		var live []*process
		for _, p := range procs {
			if p != nil {
				live = append(live, p)
			}
		}
		return live[rng.IntN(len(live))]
	}

	// The killer.
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	kills := 0
	go func() {
		defer close(killerDone)
		rng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(2000+rng.IntN(3000)) * time.Millisecond):
			}
			i := rng.IntN(2)
			mu.Lock()
			p := procs[i]
			procs[i] = nil
			mu.Unlock()
			p.cmd.Process.Kill()
			<-p.exited
			p.exited <- nil
			kills++
			time.Sleep(time.Second)
			np := startTrawl(t, bin, cfgs[i], addrs[i])
			mu.Lock()
			procs[i] = np
			mu.Unlock()
		}
	}()

	type outcome struct {
		chatID            string
		events            int
		finished, errored int
		gaps              int
		resumes           int
		takeovers         int
		unknown           bool
		over              bool // a resume answered 204: the turn had ended
	}
	results := make([]outcome, turns)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for n := range turns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rng := rand.New(rand.NewPCG(seed, uint64(n)+2))
			chatID := fmt.Sprintf("chaos-%d", n)
			o := outcome{chatID: chatID}
			req := map[string]any{"id": chatID, "trigger": "submit-message", "messages": []any{map[string]any{
				"id": "m-" + chatID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": chatID}}}}}
			var last int64
			started, done := false, false
			for attempt := 0; !done && attempt < 60; attempt++ {
				p := alive(rng)
				var resp *http.Response
				var err error
				if !started {
					resp, err = p.request("POST", "/v1/agents/durable/chat", req)
				} else {
					resp, err = p.request("GET", "/v1/agents/durable/chat/"+chatID+"/stream", nil, "Last-Event-ID", strconv.FormatInt(last, 10))
					o.resumes++
				}
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				switch {
				case resp.StatusCode == http.StatusConflict && !started:
					started = true // the POST reached a replica that died answering it
					resp.Body.Close()
					continue
				case resp.StatusCode == http.StatusNoContent:
					done, o.over = true, true // over before this resume: its thread says how
					resp.Body.Close()
					continue
				case resp.StatusCode != http.StatusOK:
					resp.Body.Close()
					time.Sleep(200 * time.Millisecond)
					continue
				}
				started = true
				for _, e := range readSSE(resp.Body, nil) {
					if e.typ == "[DONE]" {
						done = true
						continue
					}
					if e.id != last+1 {
						o.gaps++
					}
					last = e.id
					o.events++
					switch e.typ {
					case "finish":
						o.finished++
					case "error":
						o.errored++
					case "data-turn-resumed":
						o.takeovers++
					case "tool-output-error":
						o.unknown = o.unknown || strings.Contains(e.data, "outcome_unknown")
					}
				}
				resp.Body.Close()
				if !done {
					time.Sleep(200 * time.Millisecond)
				}
			}
			results[n] = o
		}()
	}
	wg.Wait()
	close(stop)
	<-killerDone

	p := alive(rand.New(rand.NewPCG(seed, 0)))
	finished, poisoned, resumes, takeovers, duplicates, lost := 0, 0, 0, 0, 0, 0
	for _, o := range results {
		resumes, takeovers = resumes+o.resumes, takeovers+o.takeovers
		switch {
		case o.gaps > 0:
			t.Errorf("%s: %d gaps or repeats in the event ids", o.chatID, o.gaps)
		case o.finished == 1 && o.errored == 0:
			finished++
		case o.errored == 1 && o.finished == 0:
			poisoned++
		case o.finished == 0 && o.errored == 0 && o.over:
			// It ended between the client's disconnect and its resume
			// (resume answers 204 once a run is over): its thread says
			// it finished, below.
			finished++
		default:
			t.Errorf("%s: %d finish, %d error chunks", o.chatID, o.finished, o.errored)
		}
		up.mu.Lock()
		writes := up.writesBy[o.chatID]
		up.mu.Unlock()
		if writes > 1 {
			duplicates++
			t.Errorf("%s: the write reached the upstream %d times", o.chatID, writes)
		}
		th := p.threadOf(t, "durable", o.chatID)
		if len(th) != 2 {
			lost++
			t.Errorf("%s: the thread holds %d messages", o.chatID, len(th))
			continue
		}
		calls := map[string]int{}
		for _, part := range th[1].Parts {
			if part.Type == "dynamic-tool" {
				calls[part.ToolCallID]++
			}
		}
		if calls["call_walk"] > 1 || calls["call_write"] > 1 {
			duplicates++
			t.Errorf("%s: the thread holds the calls %v", o.chatID, calls)
		}
		if (o.finished == 1 || (o.over && o.errored == 0)) && !o.unknown && (calls["call_walk"] != 1 || calls["call_write"] != 1 || writes != 1 || !strings.Contains(th.text(), durableAnswer)) {
			lost++
			t.Errorf("%s: finished, but the thread holds %v, the upstream %d writes", o.chatID, calls, writes)
		}
	}
	figures := map[string]int{"turns": turns, "kills": kills, "finished": finished, "poisoned": poisoned,
		"resumes": resumes, "takeovers seen": takeovers, "duplicates": duplicates, "lost": lost}
	b, _ := json.Marshal(figures)
	t.Logf("chaos (seed %d): %s", seed, b)
}
