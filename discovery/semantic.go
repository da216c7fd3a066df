package discovery

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Embedder turns texts into vectors, one per text in order, all of one
// length: an embeddings model behind an OpenAI-compatible endpoint in
// production, a fake in tests. It must be safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// VectorCache keeps tool vectors between indexes and restarts, so a
// deployment embeds each tool text once per model. Keys are hashes of
// the model and the text (see vectorKey); a key not held is simply
// absent from the answer. It must be safe for concurrent use.
type VectorCache interface {
	Vectors(ctx context.Context, keys []string) (map[string][]float32, error)
	PutVectors(ctx context.Context, vectors map[string][]float32) error
}

// Semantic configures semantic ranking: tool texts and queries are
// embedded, tools ranked by cosine similarity to the query, and that
// ranking fused with BM25's by reciprocal rank fusion. An embeddings
// failure is logged and the search answers with BM25 alone; it never
// fails a search.
type Semantic struct {
	Embedder Embedder // required
	// Model names the vectors; it is part of every cache key, so that
	// changing the model re-embeds.
	Model string
	// Cache keeps tool vectors. Nil: every index embeds its tools.
	Cache VectorCache
	// Logger receives a line for every failure. Nil: slog.Default().
	Logger *slog.Logger
	// Timeout bounds one embeddings request. Zero: 20 seconds for tool
	// texts, and a quarter of it for a query.
	Timeout time.Duration
	// RetryAfter is how long after a failure to embed the tools a search
	// tries again (in the background). Zero: one minute.
	RetryAfter time.Duration
	// Now is the clock of retries. Nil: time.Now.
	Now func() time.Time
}

// IndexOptions configure NewIndexWith. The zero value is a BM25 index.
type IndexOptions struct {
	// Semantic, when not nil, adds semantic ranking.
	Semantic *Semantic
}

// Semantic ranking's constants.
const (
	// rrfK is reciprocal rank fusion's k: a tool's fused score is the sum
	// over the rankings of 1/(rrfK + rank). 60 is the value of the method's
	// paper and of most search engines; it keeps one ranking's top from
	// outweighing agreement between both.
	rrfK = 60
	// embedBatch is how many texts one embeddings request carries.
	embedBatch = 128
	// maxEmbedText bounds a tool text sent to the model, in runes.
	maxEmbedText = 2000
)

// semanticIndex is an Index's semantic half.
type semanticIndex struct {
	cfg     Semantic
	log     *slog.Logger
	timeout time.Duration
	retry   time.Duration
	now     func() time.Time
	texts   []string      // per tool, in Index.tools order
	keys    []string      // vectorKey of each text
	closed  chan struct{} // closed by Close: stops a background fill

	mu       sync.Mutex
	vectors  [][]float32   // unit length, per tool; nil until embedded
	done     chan struct{} // closed when the fill under way ends; nil when none is
	lastErr  error         // of the last fill
	failedAt time.Time     // of the last failed fill
}

func newSemanticIndex(cfg Semantic, ts []*tools.Tool) *semanticIndex {
	s := &semanticIndex{
		cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()),
		timeout: cmp.Or(cfg.Timeout, 20*time.Second), retry: cmp.Or(cfg.RetryAfter, time.Minute),
		now: cfg.Now, closed: make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, t := range ts {
		text := embedText(t)
		s.texts = append(s.texts, text)
		s.keys = append(s.keys, vectorKey(cfg.Model, text))
	}
	return s
}

// embedText is what is embedded of a tool: its toolkit, name words and
// description, and its parameters' names.
func embedText(t *tools.Tool) string {
	var b strings.Builder
	if t.ToolkitName != "" {
		b.WriteString(t.ToolkitName + ": ")
	}
	b.WriteString(nameWords(t.Name, toolkitOf(t), t.ToolkitName, t.Provider))
	b.WriteString(". ")
	b.WriteString(t.Description)
	if len(t.Params) > 0 {
		b.WriteString(" Parameters:")
		for i, p := range t.Params {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + splitIdentifiers(p.Name))
		}
		b.WriteString(".")
	}
	return shorten(b.String(), maxEmbedText)
}

// vectorKey is the cache key of a text's vector under a model.
func vectorKey(model, text string) string {
	h := sha256.Sum256([]byte(model + "\x00" + text))
	return hex.EncodeToString(h[:])
}

// fill embeds the tool texts the cache does not hold and stores them.
func (s *semanticIndex) fill(ctx context.Context) error {
	vecs := make([][]float32, len(s.texts))
	var cached map[string][]float32
	if s.cfg.Cache != nil {
		var err error
		if cached, err = s.cfg.Cache.Vectors(ctx, s.keys); err != nil {
			s.log.Warn("discovery: reading cached tool vectors failed; embedding them again", "err", err)
			cached = nil
		}
	}
	var missing []int
	for i, k := range s.keys {
		if v, ok := cached[k]; ok {
			vecs[i] = v
		} else {
			missing = append(missing, i)
		}
	}
	fresh := map[string][]float32{}
	for start := 0; start < len(missing); start += embedBatch {
		batch := missing[start:min(start+embedBatch, len(missing))]
		texts := make([]string, len(batch))
		for j, i := range batch {
			texts[j] = s.texts[i]
		}
		got, err := s.embed(ctx, texts, s.timeout)
		if err != nil {
			return err
		}
		for j, i := range batch {
			vecs[i] = got[j]
			fresh[s.keys[i]] = got[j]
		}
	}
	dim := 0
	for i, v := range vecs {
		if dim == 0 {
			dim = len(v)
		}
		if len(v) != dim {
			return fmt.Errorf("the vectors of tool texts have %d and %d dimensions (a cached vector of another model?)", dim, len(v))
		}
		vecs[i] = unit(v)
	}
	if len(fresh) > 0 && s.cfg.Cache != nil {
		if err := s.cfg.Cache.PutVectors(ctx, fresh); err != nil {
			s.log.Warn("discovery: caching tool vectors failed", "err", err)
		}
	}
	s.mu.Lock()
	s.vectors = vecs
	s.mu.Unlock()
	return nil
}

// embed asks the embedder for texts' vectors within timeout and checks
// the answer's shape.
func (s *semanticIndex) embed(ctx context.Context, texts []string, timeout time.Duration) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got, err := s.cfg.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(got) != len(texts) {
		return nil, fmt.Errorf("embeddings: %d vectors for %d texts", len(got), len(texts))
	}
	for _, v := range got {
		if len(v) == 0 || len(v) != len(got[0]) {
			return nil, errors.New("embeddings: vectors of different or zero length")
		}
	}
	return got, nil
}

// ready returns the tool vectors, or nil when they are not there yet; a
// failure older than the retry interval starts another fill.
func (s *semanticIndex) ready() [][]float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vectors == nil && s.done == nil && s.now().Sub(s.failedAt) >= s.retry {
		s.startLocked()
	}
	return s.vectors
}

// startLocked starts filling in the background; s.mu is held. The fill
// ends with Close at the latest.
func (s *semanticIndex) startLocked() {
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.closed:
				cancel()
			case <-done:
			}
		}()
		err := s.fill(ctx)
		s.mu.Lock()
		s.done, s.lastErr = nil, err
		if err != nil {
			s.failedAt = s.now()
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Warn("discovery: embedding the tools failed; searching with BM25 alone until a retry succeeds",
				"tools", len(s.texts), "retry_after", s.retry, "err", err)
		}
	}()
}

// wait waits for a fill under way to end and returns its error.
func (s *semanticIndex) wait(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// rank ranks the tools by cosine similarity to the query, best first, at
// most depth of them; keep filters (nil: all). It returns nil, having
// logged why, when there are no tool vectors or the query cannot be
// embedded.
func (s *semanticIndex) rank(ctx context.Context, q string, depth int, keep func(i int) bool) []int {
	vecs := s.ready()
	if len(vecs) == 0 {
		return nil
	}
	got, err := s.embed(ctx, []string{q}, s.timeout/4)
	if err != nil {
		s.log.Warn("discovery: embedding the query failed; searching with BM25 alone", "err", err)
		return nil
	}
	qv := unit(got[0])
	if len(qv) != len(vecs[0]) {
		s.log.Warn("discovery: the query vector's length differs from the tools'; searching with BM25 alone", "query", len(qv), "tools", len(vecs[0]))
		return nil
	}
	type scored struct {
		i   int
		cos float64
	}
	all := make([]scored, 0, len(vecs))
	for i, v := range vecs {
		if keep != nil && !keep(i) {
			continue
		}
		var dot float64
		for j := range v {
			dot += float64(v[j]) * float64(qv[j])
		}
		all = append(all, scored{i, dot})
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Or(cmp.Compare(b.cos, a.cos), cmp.Compare(a.i, b.i)) })
	out := make([]int, 0, min(depth, len(all)))
	for _, sc := range all[:min(depth, len(all))] {
		out = append(out, sc.i)
	}
	return out
}

func (s *semanticIndex) close() { close(s.closed) }

// unit scales v to length 1 (a zero vector stays zero).
func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	n = math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// fuse merges the lexical and the semantic ranking by reciprocal rank
// fusion; a tool in only one ranking scores from that one alone.
// semantic holds indexes into tools.
func fuse(lexical []Hit, semantic []int, ts []*tools.Tool) []Hit {
	score := map[string]float64{}
	byID := map[string]*tools.Tool{}
	for r, h := range lexical {
		score[h.Tool.ID] += 1 / float64(rrfK+r+1)
		byID[h.Tool.ID] = h.Tool
	}
	for r, i := range semantic {
		t := ts[i]
		score[t.ID] += 1 / float64(rrfK+r+1)
		byID[t.ID] = t
	}
	out := make([]Hit, 0, len(score))
	for id, sc := range score {
		out = append(out, Hit{Tool: byID[id], Score: sc})
	}
	slices.SortFunc(out, func(a, b Hit) int { return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Tool.ID, b.Tool.ID)) })
	return out
}
