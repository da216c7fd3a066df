package deploy

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/runlease"
)

// Durable runs. A run that writes a record (RunHost.Record) and saves
// its checkpoints through the host (RunHost.Checkpoint) outlives the
// process running it:
//
//   - when its replica dies, the replica the sweep hands its lapsed claim
//     to claims it again under the same run id and continues it from its
//     last checkpoint, streaming on into the same log (a run continued
//     too often — MaxTakeovers — ends with an error chunk instead);
//   - a draining replica (SIGTERM) hands each run off at its next idle
//     checkpoint: its claim is freed and swept at once elsewhere;
//   - in one process (the embedded default), a run still running when
//     the shutdown grace ends, or when the process died, is continued
//     after the restart.
//
// The record holds what the run's kind needs to continue it (Spec, its
// Continuer reads it) and its last checkpoint (State), with the log's
// last event at that moment (Seq): what follows it in the log is what
// the interrupted step showed.

// RunRecord is what the run host keeps of a running run.
type RunRecord struct {
	Key     string    `json:"key"`
	RunID   string    `json:"runId"`
	Kind    string    `json:"kind"`
	Started time.Time `json:"started"`
	// Takeovers counts the continuations after the run's process died;
	// Continuations every continuation (hand-offs too).
	Takeovers     int `json:"takeovers,omitempty"`
	Continuations int `json:"continuations,omitempty"`
	// HandedOff says the run's process handed it off (it drained), rather
	// than died.
	HandedOff bool `json:"handedOff,omitempty"`
	// Spec is the kind's description of the run; State its last
	// checkpoint (none before the first); Seq the last event of the log
	// when State was saved.
	Spec  json.RawMessage `json:"spec"`
	State json.RawMessage `json:"state,omitempty"`
	Seq   int64           `json:"seq"`
}

// Continuation says how a run is continued.
type Continuation struct {
	// By names the replica continuing it; Reason is "takeover" (its
	// replica died), "handoff" (it drained) or "restart" (this process
	// restarted); Count is the record's Continuations, this one included.
	By, Reason string
	Count      int
	// Tail are the chunks of the run's log after the record's Seq.
	Tail []stream.Chunk
}

// Continuer continues a run of its kind on this process from rec: it
// returns the run's work, as Start takes it. An error ends the run with
// an error chunk.
type Continuer func(ctx context.Context, r *Run, rec RunRecord, how Continuation) (func(ctx context.Context), error)

// MaxTakeovers is how many times a run is continued after its process
// died; the next death ends it (a run that kills whatever runs it).
const MaxTakeovers = 3

// Kinds of durable runs.
const (
	KindTurn     = "turn"
	KindWorkflow = "workflow"
)

// poisonText ends a run continued MaxTakeovers times whose process died
// again.
const poisonText = "the server running this turn stopped before it finished, again after it was continued %d times; what it had done so far is saved — send the message again to continue"

// Record writes r's record: the run is durable from now on. spec is the
// kind's description of it (JSON).
func (h *RunHost) Record(ctx context.Context, r *Run, kind string, spec any) error {
	if h.records == nil {
		return nil
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	rec := &RunRecord{Key: r.key, RunID: r.id, Kind: kind, Started: h.t.Clock.Now().UTC(), Spec: b}
	r.recMu.Lock()
	defer r.recMu.Unlock()
	if err := h.putRecord(ctx, r, rec); err != nil {
		return err
	}
	r.rec = rec
	return nil
}

// durable reports whether r keeps a record.
func (r *Run) durable() bool {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	return r.rec != nil
}

// Key is the run's claim key.
func (r *Run) Key() string { return r.key }

// Emit appends c to r's log and notes its seq for the next checkpoint.
func (h *RunHost) Emit(ctx context.Context, r *Run, c stream.Chunk) error {
	seq, err := h.events.Append(ctx, r.id, c)
	if err == nil {
		for {
			old := r.lastSeq.Load()
			if seq <= old || r.lastSeq.CompareAndSwap(old, seq) {
				break
			}
		}
	}
	return err
}

// Checkpoint saves state as r's last checkpoint, fenced on its claim
// (runlease.ErrFenced when it lost it). On a host that drains, a
// checkpoint where the run is idle answers agent.ErrHandOff once saved:
// the run stops there and another replica continues it.
func (h *RunHost) Checkpoint(ctx context.Context, r *Run, state any, idle bool) error {
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	r.recMu.Lock()
	defer r.recMu.Unlock()
	if r.rec == nil {
		return nil
	}
	rec := *r.rec
	rec.State, rec.Seq = b, r.lastSeq.Load()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.t.StoreWait)
	defer cancel()
	// The checkpoint names the log's event Seq: that event must outlive
	// a crash as surely as the checkpoint does.
	if err := syncEvents(sctx, h.events); err != nil {
		return err
	}
	if err := h.retryStore(sctx, func() error { return h.putRecord(sctx, r, &rec) }); err != nil {
		return err
	}
	r.rec = &rec
	if idle && h.handsOff() {
		r.handedOff.Store(true)
		return agent.ErrHandOff
	}
	return nil
}

// Resumable is the run a client resuming key follows: the one holding
// it on any replica, or else one waiting to be continued (its replica
// died or handed it off, and no replica has taken it over yet); "" when
// none.
func (h *RunHost) Resumable(ctx context.Context, key string) (string, error) {
	id, err := h.reg.Active(ctx, key)
	if err != nil || id != "" || h.records == nil {
		return id, err
	}
	rec, ok, err := h.getRecord(ctx, key)
	if err != nil || !ok {
		return "", err
	}
	return rec.RunID, nil
}

// handsOff reports whether runs hand off at their next idle checkpoint:
// the host drains and another replica can take them at once.
func (h *RunHost) handsOff() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, lapses := h.reg.(runlease.Sweeper)
	return h.draining && lapses
}

// putRecord writes rec for r, fenced on r's claim where the store can.
func (h *RunHost) putRecord(ctx context.Context, r *Run, rec *RunRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var fenced func(string, string) (bool, error)
	if fr, ok := h.records.(fencedRecords); ok {
		fenced = func(fenceKey, fenceValue string) (bool, error) {
			return fr.PutFenced(ctx, r.key, b, fenceKey, fenceValue)
		}
	}
	return h.SaveHeld(ctx, r.key, r.id, fenced, func() error { return h.records.Put(ctx, r.key, b) })
}

// getRecord is the record under key, if any.
func (h *RunHost) getRecord(ctx context.Context, key string) (RunRecord, bool, error) {
	var rec RunRecord
	var b []byte
	var ok bool
	err := h.retryStore(ctx, func() (err error) {
		b, ok, err = h.records.Get(ctx, key)
		return err
	})
	if err != nil || !ok {
		return rec, false, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("run record %q: %w", key, err)
	}
	return rec, true, nil
}

// dropRecord deletes key's record if it is still runID's.
func (h *RunHost) dropRecord(ctx context.Context, key, runID string) {
	if h.records == nil {
		return
	}
	rec, ok, err := h.getRecord(ctx, key)
	if err == nil && ok && rec.RunID == runID {
		err = h.retryStore(ctx, func() error { _, err := h.records.Delete(ctx, key); return err })
	}
	if err != nil {
		h.log.Warn("deleting a run's record", "key", key, "run", runID, "err", err)
	}
}

// deleteRecord deletes r's record: the run has ended.
func (h *RunHost) deleteRecord(ctx context.Context, r *Run) {
	if r.durable() {
		h.dropRecord(ctx, r.key, r.id)
	}
}

// handOff ends a run that another process continues: its claim is handed
// off (freed and swept at once elsewhere) or, in one process, released;
// its log and record stay.
func (h *RunHost) handOff(ctx context.Context, r *Run) {
	r.recMu.Lock()
	if r.rec != nil {
		rec := *r.rec
		rec.HandedOff = true
		if err := h.putRecord(ctx, r, &rec); err != nil {
			h.log.Warn("marking a run handed off", "run", r.id, "err", err)
		}
	}
	r.recMu.Unlock()
	if ho, ok := r.lease.(runlease.HandOff); ok {
		if _, err := ho.HandOff(ctx); err != nil {
			h.log.Warn("handing a run off", "run", r.id, "err", err)
		} else {
			h.log.Info("handed a run off to be continued from its checkpoint", "run", r.id, "key", r.key)
		}
	} else if err := r.lease.Release(ctx); err != nil {
		h.log.Warn("releasing a run claim", "run", r.id, "err", err)
	}
	h.remove(r)
	close(r.done)
}

// Continue sets how each kind of run is continued and begins continuing
// runs: on a registry whose claims lapse, the sweep continues (or ends)
// the runs of dead replicas and those handed off; in one process, the
// runs its records hold — those a restart interrupted — are continued
// now. Call it once, when the kinds' continuers are ready.
func (h *RunHost) Continue(continuers map[string]Continuer) {
	h.mu.Lock()
	if h.serving {
		h.mu.Unlock()
		return
	}
	h.serving, h.continuers = true, continuers
	h.mu.Unlock()
	if sw, lapses := h.reg.(runlease.Sweeper); lapses {
		h.sweeps.Add(1)
		go h.sweep(sw, sweepEvery(h.lease))
		return
	}
	if h.records == nil {
		return
	}
	var recs []RunRecord
	err := h.records.ForEach(h.ctx, func(_ string, v []byte) error {
		var rec RunRecord
		if json.Unmarshal(v, &rec) == nil {
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		h.log.Error("reading the records of the runs a restart interrupted", "err", err)
	}
	continued := map[string]bool{}
	for _, rec := range recs {
		continued[rec.RunID] = true
		h.continueRecord(h.ctx, rec, "restart")
	}
	// The logs the restart left open with no run to continue them (a run
	// that was not durable, or whose record was dropped) end as a dead
	// replica's do.
	for _, id := range recoveredOf(h.events) {
		if !continued[id] {
			h.endLapsed(h.ctx, runlease.Claim{RunID: id})
		}
	}
}

// eventSyncer is an event log that commits in groups (boltlog): Sync
// waits until what was appended is durable.
type eventSyncer interface {
	Sync(ctx context.Context) error
}

// syncEvents syncs l when it commits in groups.
func syncEvents(ctx context.Context, l stream.EventLog) error {
	if s, ok := l.(eventSyncer); ok {
		return s.Sync(ctx)
	}
	return nil
}

// recoveredRuns is an event log that outlives its process (boltlog): it
// lists the runs left open when the process stopped.
type recoveredRuns interface {
	Recovered() []string
}

// recoveredOf lists the runs l found open at its start.
func recoveredOf(l stream.EventLog) []string {
	if r, ok := l.(recoveredRuns); ok {
		return r.Recovered()
	}
	return nil
}

// continuer is the continuer of kind (nil: none).
func (h *RunHost) continuer(kind string) Continuer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.continuers[kind]
}

// Drain makes the host hand its runs off: on a registry whose claims
// lapse, each run stops at its next idle checkpoint and another replica
// continues it at once; and the host takes over no run from now on.
func (h *RunHost) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
}

// draining reports whether Drain was called.
func (h *RunHost) isDraining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

// HandOffAll stops every run of this process now: a durable one is left
// to be continued from its last checkpoint — by another replica at once,
// or in one process after the restart — and any other is cancelled
// (StopAll). It returns once every run has ended here.
func (h *RunHost) HandOffAll() {
	h.Drain()
	h.mu.Lock()
	runs := make([]*Run, 0, len(h.local))
	for _, r := range h.local {
		runs = append(runs, r)
	}
	h.mu.Unlock()
	// Not under h.mu: a run saving a checkpoint holds its recMu and
	// then takes h.mu (handsOff).
	for _, r := range runs {
		if r.durable() {
			r.cancel(agent.ErrHandOff)
		}
	}
	h.StopAll()
	h.releasedOnce.Do(func() { close(h.released) })
}

// Released closes once this process runs no more runs (HandOffAll): the
// streams it serves end then, without a last chunk, and their clients
// resume wherever the runs go on — another replica, or this deployment
// after its restart.
func (h *RunHost) Released() <-chan struct{} { return h.released }

// continueLapsed continues a run whose replica died (or handed it off):
// this replica was handed the claim alone. A run that cannot be
// continued — no record, a kind this process does not continue, one
// continued MaxTakeovers times already, a log gone — is ended as before.
func (h *RunHost) continueLapsed(ctx context.Context, c runlease.Claim) {
	if h.records == nil {
		h.endLapsed(ctx, c)
		return
	}
	rec, ok, err := h.getRecord(ctx, c.Key)
	if err != nil {
		h.log.Warn("reading a dead replica's run record", "run", c.RunID, "err", err)
	}
	if !ok || rec.RunID != c.RunID {
		h.endLapsed(ctx, c)
		return
	}
	h.continueRecord(ctx, rec, "takeover")
}

// continueRecord claims rec's key for its run again and continues it.
func (h *RunHost) continueRecord(ctx context.Context, rec RunRecord, reason string) {
	c := runlease.Claim{Key: rec.Key, RunID: rec.RunID}
	end := func(text string) {
		h.endWith(ctx, c, text)
		h.dropRecord(ctx, rec.Key, rec.RunID)
	}
	fn := h.continuer(rec.Kind)
	if fn == nil {
		end("")
		return
	}
	st, err := h.events.Stat(ctx, rec.RunID)
	switch {
	case errors.Is(err, stream.ErrRunNotFound):
		// The log is gone (a process whose log was in memory): the run
		// goes on into a new one, for whoever resumes it from now on.
		if err := h.events.Open(ctx, rec.RunID); err != nil {
			h.log.Warn("reopening a continued run's log", "run", rec.RunID, "err", err)
			h.dropRecord(ctx, rec.Key, rec.RunID)
			return
		}
		rec.Seq = 0
	case err != nil:
		h.log.Warn("continuing a run", "run", rec.RunID, "err", err)
		return
	case st.Closed:
		// It ended, but its claim was not released: nothing to continue.
		h.dropRecord(ctx, rec.Key, rec.RunID)
		if h.onLapsed != nil {
			h.onLapsed(ctx, c)
		}
		return
	}
	if rec.HandedOff && reason == "takeover" {
		reason = "handoff"
	}
	if !rec.HandedOff && rec.Takeovers >= MaxTakeovers {
		h.log.Warn("not continuing a run again: it was continued too often", "run", rec.RunID, "key", rec.Key, "takeovers", rec.Takeovers)
		end(fmt.Sprintf(poisonText, rec.Takeovers))
		return
	}
	lease, err := h.reg.Acquire(ctx, rec.Key, rec.RunID)
	if err != nil {
		// Another run took the key meanwhile (a new turn on the chat).
		h.log.Info("not continuing a run: its key is taken", "run", rec.RunID, "key", rec.Key, "err", err)
		h.endWith(ctx, c, "")
		return
	}
	if !rec.HandedOff {
		rec.Takeovers++
	}
	rec.Continuations++
	rec.HandedOff = false
	remaining := max(time.Until(rec.Started.Add(runDeadline)), 30*time.Second)
	r := h.newRun(h.ctx, rec.Key, rec.RunID, lease, remaining)
	r.lastSeq.Store(st.LastSeq)
	r.rec = &rec
	abandon := func(why string, err error) {
		h.log.Warn(why, "run", rec.RunID, "err", err)
		h.endWith(ctx, c, "")
		h.deleteRecord(ctx, r)
		r.cancel(nil)
		_ = lease.Release(ctx)
		h.remove(r)
		close(r.done)
	}
	if err := h.retryStore(ctx, func() error { return h.putRecord(ctx, r, &rec) }); err != nil {
		abandon("continuing a run: saving its record", err)
		return
	}
	tail, err := h.tail(ctx, rec.RunID, rec.Seq, st.LastSeq)
	if err != nil {
		abandon("continuing a run: reading its log", err)
		return
	}
	work, err := fn(r.ctx, r, rec, Continuation{By: h.replica, Reason: reason, Count: rec.Continuations, Tail: tail})
	if err != nil {
		abandon("continuing a run", err)
		return
	}
	h.log.Info("continuing a run from its checkpoint", "run", rec.RunID, "key", rec.Key, "reason", reason, "count", rec.Continuations)
	h.Start(r, work)
}

// tail reads the chunks of runID's log after seq, up to last.
func (h *RunHost) tail(ctx context.Context, runID string, after, last int64) ([]stream.Chunk, error) {
	if after >= last {
		return nil, nil
	}
	var out []stream.Chunk
	for ev, err := range h.events.Read(ctx, runID, after) {
		if err != nil {
			return nil, err
		}
		c, err := stream.ParseChunk(ev.Data)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		out = append(out, c)
		if ev.Seq >= last {
			break
		}
	}
	return out, nil
}

// endWith ends c's run's log as endLapsed does, with text ("": the
// kind's lapsed text).
func (h *RunHost) endWith(ctx context.Context, c runlease.Claim, text string) {
	if text == "" {
		h.endLapsed(ctx, c)
		return
	}
	h.endLapsedText(ctx, c, text)
}

// sealer seals what a run's record must keep secret (a session's
// credentials) with the deployment's key.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) == 0 {
		return nil, errors.New("no key to seal with")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// SealRun seals plain for the record of run runID.
func (d *Deployment) SealRun(runID string, plain []byte) ([]byte, error) {
	s, err := newSealer(d.stores.secretKey)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, plain, []byte("run-record:"+runID)), nil
}

// OpenRun opens what SealRun sealed for run runID.
func (d *Deployment) OpenRun(runID string, sealed []byte) ([]byte, error) {
	s, err := newSealer(d.stores.secretKey)
	if err != nil {
		return nil, err
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed run data is damaged")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], []byte("run-record:"+runID))
}
