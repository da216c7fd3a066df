package workflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Status is where a run is: running until it ends done, failed or
// stopped.
type Status string

// A run's statuses.
const (
	StatusRunning Status = "running"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
	StatusStopped Status = "stopped"
)

// Ended reports whether a run in status s has ended.
func (s Status) Ended() bool { return s != StatusRunning }

// Run is what a run leaves: its summary (every field but Result) and,
// once it ended, its Result. A RunStore keeps the two apart, so a list of
// runs never reads a result.
type Run struct {
	ID       string     `json:"id"`
	Workflow string     `json:"workflow"`
	Status   Status     `json:"status"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended,omitempty"`
	Result   *Result    `json:"result,omitempty"`
	// Error says why a run failed without a result (its replica died).
	Error string `json:"error,omitempty"`
}

// summary is r without its result.
func (r *Run) summary() *Run {
	s := *r
	s.Result = nil
	return &s
}

// ErrRunNotFound is returned for a run a RunStore does not hold (never
// stored, or pruned).
var ErrRunNotFound = errors.New("workflow run not found")

// ClaimKey is the key a run of id claims in the run registry while it
// runs (one run per key on every replica); a Redis store keeps the run in
// that claim's slot on a Redis Cluster, so a fenced put is one script.
func ClaimKey(runID string) string { return "workflow-run:" + runID }

// RunStore keeps workflow runs within a RunRetention. Implementations are
// safe for concurrent use; one run is written by the run itself (at its
// start and its end) and, when its replica died, by the replica that
// ends it.
type RunStore interface {
	// PutRun stores r, replacing the run of that id (a nil Result stores
	// none). A workflow's new run beyond MaxPerWorkflow deletes its
	// oldest ended ones.
	PutRun(ctx context.Context, r *Run) error
	// GetRun returns run id with its result, both read together.
	GetRun(ctx context.Context, id string) (*Run, error)
	// GetSummary returns run id without its result, which it does not
	// read.
	GetSummary(ctx context.Context, id string) (*Run, error)
	// ListRuns returns workflowID's runs, newest started first, at most
	// limit (zero: all), without their results.
	ListRuns(ctx context.Context, workflowID string, limit int) ([]*Run, error)
	// Prune deletes the runs started before MaxAge and reports how
	// many. A deployment runs it at start and then hourly.
	Prune(ctx context.Context) (int, error)
}

// RunRetention bounds what a RunStore keeps; the oldest go first. Zero
// fields mean the defaults; a negative one lifts its bound.
type RunRetention struct {
	// MaxPerWorkflow: when a workflow's new run puts it over this many,
	// its runs started longest ago are deleted, running ones excepted.
	// Zero: 1000.
	MaxPerWorkflow int
	// MaxAge: Prune deletes the runs started longer ago, running or not
	// (a run lasts minutes; one still "running" days later lost its
	// process). Zero: 90 days.
	MaxAge time.Duration
	// Now is Prune's clock. Nil: time.Now.
	Now func() time.Time
}

// Run retention defaults.
const (
	DefaultMaxRunsPerWorkflow = 1000
	DefaultRunMaxAge          = 90 * 24 * time.Hour
)

// WithDefaults returns r with its zero fields set to the defaults, as
// every RunStore applies it.
func (r RunRetention) WithDefaults() RunRetention {
	if r.MaxPerWorkflow == 0 {
		r.MaxPerWorkflow = DefaultMaxRunsPerWorkflow
	}
	if r.MaxAge == 0 {
		r.MaxAge = DefaultRunMaxAge
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// The embedded store's buckets. Summaries and results are apart, so a
// list reads no result; the index orders each workflow's runs by start
// without decoding them.
var (
	bucketRunSummaries = []byte("workflow_run_summaries")
	bucketRunResults   = []byte("workflow_run_results")
	// bucketRunIndex maps <escaped workflow id>/<start: 8 bytes, Unix
	// nanoseconds, big-endian><run id> to the run's status.
	bucketRunIndex = []byte("workflow_run_index")
)

// BoltRunStore is the RunStore in the embedded bbolt file: runs survive a
// restart, within its RunRetention.
type BoltRunStore struct {
	db  *bolt.DB
	ret RunRetention
}

var _ RunStore = (*BoltRunStore)(nil)

// NewBoltRunStore returns the run store on db, creating its buckets.
func NewBoltRunStore(db *bolt.DB, ret RunRetention) (*BoltRunStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketRunSummaries, bucketRunResults, bucketRunIndex} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflow run store: %w", err)
	}
	return &BoltRunStore{db: db, ret: ret.WithDefaults()}, nil
}

// workflowPrefix begins the index keys of workflowID's runs (PathEscape
// escapes '/', so no workflow's prefix is another's).
func workflowPrefix(workflowID string) []byte {
	return []byte(url.PathEscape(workflowID) + "/")
}

func indexKey(r *Run) []byte {
	k := workflowPrefix(r.Workflow)
	k = binary.BigEndian.AppendUint64(k, startNanos(r.Started))
	return append(k, r.ID...)
}

// startNanos orders runs by start; a zero time sorts first.
func startNanos(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

// indexStart is the start of the run an index key names (after its
// workflow prefix).
func indexStart(k []byte) (start uint64, id string, ok bool) {
	i := bytes.IndexByte(k, '/')
	if i < 0 || len(k) < i+1+8 {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[i+1:]), string(k[i+9:]), true
}

// PutRun implements RunStore.
func (s *BoltRunStore) PutRun(_ context.Context, r *Run) error {
	sum, err := json.Marshal(r.summary())
	if err != nil {
		return err
	}
	var res []byte
	if r.Result != nil {
		if res, err = json.Marshal(r.Result); err != nil {
			return err
		}
	}
	id := []byte(r.ID)
	return s.db.Update(func(tx *bolt.Tx) error {
		sums, index := tx.Bucket(bucketRunSummaries), tx.Bucket(bucketRunIndex)
		isNew := true
		if old := sums.Get(id); old != nil {
			isNew = false
			var o Run
			if json.Unmarshal(old, &o) == nil {
				if err := index.Delete(indexKey(&o)); err != nil {
					return err
				}
			}
		}
		if err := sums.Put(id, sum); err != nil {
			return err
		}
		results := tx.Bucket(bucketRunResults)
		if res != nil {
			err = results.Put(id, res)
		} else {
			err = results.Delete(id)
		}
		if err != nil {
			return err
		}
		if err := index.Put(indexKey(r), []byte(r.Status)); err != nil {
			return err
		}
		if isNew && s.ret.MaxPerWorkflow > 0 {
			return s.pruneWorkflow(tx, r)
		}
		return nil
	})
}

// pruneWorkflow deletes r's workflow's runs started longest ago beyond
// MaxPerWorkflow, never r nor a running one.
func (s *BoltRunStore) pruneWorkflow(tx *bolt.Tx, r *Run) error {
	prefix := workflowPrefix(r.Workflow)
	c := tx.Bucket(bucketRunIndex).Cursor()
	n := 0
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	excess := n - s.ret.MaxPerWorkflow
	var doomed [][]byte
	for k, v := c.Seek(prefix); excess > 0 && k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		_, id, ok := indexStart(k)
		if !ok || id == r.ID || Status(v) == StatusRunning {
			continue
		}
		doomed = append(doomed, bytes.Clone(k))
		excess--
	}
	for _, k := range doomed {
		if err := deleteRun(tx, k); err != nil {
			return err
		}
	}
	return nil
}

// deleteRun deletes the run an index key names.
func deleteRun(tx *bolt.Tx, indexKey []byte) error {
	_, id, _ := indexStart(indexKey)
	for _, b := range [][]byte{bucketRunSummaries, bucketRunResults} {
		if err := tx.Bucket(b).Delete([]byte(id)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketRunIndex).Delete(indexKey)
}

// GetRun implements RunStore.
func (s *BoltRunStore) GetRun(_ context.Context, id string) (*Run, error) {
	return s.get(id, true)
}

// GetSummary implements RunStore.
func (s *BoltRunStore) GetSummary(_ context.Context, id string) (*Run, error) {
	return s.get(id, false)
}

func (s *BoltRunStore) get(id string, withResult bool) (*Run, error) {
	var r *Run
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRunSummaries).Get([]byte(id))
		if v == nil {
			return ErrRunNotFound
		}
		r = new(Run)
		if err := json.Unmarshal(v, r); err != nil {
			return fmt.Errorf("workflow run %s: %w", id, err)
		}
		if !withResult {
			return nil
		}
		if res := tx.Bucket(bucketRunResults).Get([]byte(id)); res != nil {
			r.Result = new(Result)
			if err := json.Unmarshal(res, r.Result); err != nil {
				return fmt.Errorf("workflow run %s: result: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ListRuns implements RunStore: the workflow's index, newest first.
func (s *BoltRunStore) ListRuns(_ context.Context, workflowID string, limit int) ([]*Run, error) {
	prefix := workflowPrefix(workflowID)
	out := []*Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		sums := tx.Bucket(bucketRunSummaries)
		c := tx.Bucket(bucketRunIndex).Cursor()
		// The last key of the prefix: seek past it and step back.
		end := append(bytes.Clone(prefix[:len(prefix)-1]), '/'+1)
		k, _ := c.Seek(end)
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			_, id, ok := indexStart(k)
			if !ok {
				continue
			}
			v := sums.Get([]byte(id))
			if v == nil {
				continue
			}
			r := new(Run)
			if err := json.Unmarshal(v, r); err != nil {
				return fmt.Errorf("workflow run %s: %w", id, err)
			}
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// Prune implements RunStore.
func (s *BoltRunStore) Prune(_ context.Context) (int, error) {
	if s.ret.MaxAge <= 0 {
		return 0, nil
	}
	cutoff := startNanos(s.ret.Now().Add(-s.ret.MaxAge))
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var old [][]byte
		err := tx.Bucket(bucketRunIndex).ForEach(func(k, _ []byte) error {
			if start, _, ok := indexStart(k); ok && start < cutoff {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := deleteRun(tx, k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}
