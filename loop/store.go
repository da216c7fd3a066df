package loop

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	gocache "github.com/patrickmn/go-cache"

	"github.com/trawl-dev/trawl/loop/query"
)

// Errors of the result store. Retrieval wraps them with the result id.
var (
	// ErrResultNotFound: no result under this id in this scope. A result
	// of another thread or organization answers exactly the same.
	ErrResultNotFound = errors.New("not found")
	// ErrResultExpired: the result was kept but its time ran out or it
	// was evicted to make room.
	ErrResultExpired = errors.New("expired — call the tool again")
	// ErrResultTooLarge: the result alone is larger than the store holds.
	ErrResultTooLarge = errors.New("too large to keep")
)

// ResultStore keeps full tool payloads aside for the retrieval tools. Keys
// are opaque to the store; Retrieval builds them from the result scope and
// the result id, so a lookup from another scope is simply a key never
// stored. A record is handed over whole and must not be modified by
// either side afterwards; a store that leaves the process serialises it
// with its MarshalBinary and UnmarshalBinary.
//
// Implementations are safe for concurrent use.
type ResultStore interface {
	// Put keeps rec under key until expires. It may evict older records
	// to stay within its bounds; a record larger than the bounds
	// themselves is ErrResultTooLarge.
	Put(ctx context.Context, key string, rec *StoredResult, expires time.Time) error
	// Get returns the record under key: ErrResultNotFound for a key it
	// never held, ErrResultExpired for one that expired or was evicted.
	Get(ctx context.Context, key string) (*StoredResult, error)
}

// StoredResult is one full payload kept aside: the JSON text exactly as
// fetchToolResult slices it, and — found once, when it is built — where
// each item of its primary array sits in that text and where every
// 1,024th character begins, so neither tool ever parses the whole text
// again.
type StoredResult struct {
	// Tool names the tool that produced the payload.
	Tool string
	// Created is when the payload was kept.
	Created time.Time
	// Set is the verdict of the walk that fetched the rows (zero: a call
	// that did not loop), for the aggregates made over them later.
	Set SetVerdict

	text      []byte
	itemsPath string
	hasItems  bool
	spans     []span   // each item's bytes in text
	runes     int      // characters in text
	marks     []uint32 // byte offset of character k*runeStride; nil when text is ASCII
}

type span struct{ start, end uint32 }

const (
	runeStride = 1024
	maxStored  = 1<<32 - 1 // offsets are uint32
)

// NewStoredResult builds a record from a whole payload. itemsPath is the
// dot path of its primary array ("" to detect it, as Guard does); a
// payload with no array (or that is not JSON at all) is kept as text that
// only fetchToolResult reads. doc is retained, not copied: the caller
// must not modify it afterwards. Invalid UTF-8 is replaced by U+FFFD so
// that every slice of the text is valid.
func NewStoredResult(tool string, doc []byte, itemsPath string) (*StoredResult, error) {
	if len(doc) > maxStored {
		return nil, ErrResultTooLarge
	}
	if !utf8.Valid(doc) {
		doc = bytes.ToValidUTF8(doc, []byte("\uFFFD"))
	}
	r := &StoredResult{Tool: tool, text: doc}
	r.index()
	path, arr, ok := primaryArray(doc, itemsPath)
	if !ok {
		return r, nil
	}
	elems, err := query.Elements(arr)
	if err != nil {
		if itemsPath != "" {
			return nil, fmt.Errorf("stored result: items at %q: %w", itemsPath, err)
		}
		return r, nil // detected on a best-effort basis: keep as text
	}
	spans, err := spansOf(doc, arr, elems)
	if err != nil {
		return nil, err
	}
	r.itemsPath, r.hasItems, r.spans = path, true, spans
	return r, nil
}

// NewStoredResultFromItems builds a record from a walk's merged items
// without parsing anything again: the text is envelope with the value at
// itemsPath replaced by the array of items (itemsPath "" makes the text
// the bare array). Items must each be one valid JSON value.
func NewStoredResultFromItems(tool string, envelope []byte, itemsPath string, items [][]byte) (*StoredResult, error) {
	prefix, suffix := []byte(nil), []byte(nil)
	if itemsPath != "" {
		doc, err := query.Replace(envelope, itemsPath, []byte("[]"))
		if err != nil {
			return nil, fmt.Errorf("stored result: %w", err)
		}
		arr, _ := query.Get(doc, itemsPath)
		off, ok := query.OffsetIn(doc, arr)
		if !ok {
			return nil, fmt.Errorf("stored result: cannot place the items at %q", itemsPath)
		}
		prefix, suffix = doc[:off], doc[off+len(arr):]
	}
	n := len(prefix) + len(suffix) + 2 + len(items)
	for _, it := range items {
		n += len(it)
	}
	if n > maxStored {
		return nil, ErrResultTooLarge
	}
	text := make([]byte, 0, n)
	text = append(text, prefix...)
	text = append(text, '[')
	spans := make([]span, len(items))
	for i, it := range items {
		if i > 0 {
			text = append(text, ',')
		}
		spans[i].start = uint32(len(text))
		text = append(text, it...)
		spans[i].end = uint32(len(text))
	}
	text = append(text, ']')
	text = append(text, suffix...)
	if !utf8.Valid(text) {
		// Rare; re-derive everything from the repaired text.
		return NewStoredResult(tool, text, itemsPath)
	}
	r := &StoredResult{Tool: tool, text: text, itemsPath: itemsPath, hasItems: true, spans: spans}
	r.index()
	return r, nil
}

// spansOf locates elems — the elements of arr as query.Elements returns
// them: sub-slices, in order — in doc, of which arr is a sub-slice.
func spansOf(doc, arr []byte, elems [][]byte) ([]span, error) {
	spans := make([]span, len(elems))
	pos, ok := query.OffsetIn(doc, arr)
	if !ok {
		return nil, errors.New("stored result: the items are not part of the text")
	}
	pos++ // past '['
	for i, e := range elems {
		// Only white space and one comma separate elements.
		for pos < len(doc) && (doc[pos] == ',' || doc[pos] == ' ' || doc[pos] == '\n' || doc[pos] == '\r' || doc[pos] == '\t') {
			pos++
		}
		if pos+len(e) > len(doc) || &doc[pos] != &e[0] {
			return nil, errors.New("stored result: item boundaries do not line up with the text")
		}
		spans[i] = span{uint32(pos), uint32(pos + len(e))}
		pos += len(e)
	}
	return spans, nil
}

// index counts the text's characters and marks every runeStride-th one.
// The text is valid UTF-8, so characters are the bytes that do not
// continue a sequence.
func (r *StoredResult) index() {
	r.marks = nil
	n := utf8.RuneCount(r.text)
	r.runes = n
	if n == len(r.text) {
		return // ASCII: character offsets are byte offsets
	}
	r.marks = make([]uint32, 0, n/runeStride+1)
	left := 0 // characters until the next mark
	for i, b := range r.text {
		if b&0xC0 == 0x80 {
			continue
		}
		if left == 0 {
			r.marks = append(r.marks, uint32(i))
			left = runeStride
		}
		left--
	}
}

// Text is the stored JSON text. It must not be modified.
func (r *StoredResult) Text() []byte { return r.text }

// Len is the length of the text in characters.
func (r *StoredResult) Len() int { return r.runes }

// HasItems reports whether the payload has a primary array.
func (r *StoredResult) HasItems() bool { return r.hasItems }

// ItemsPath is the dot path of the primary array ("" for a bare array).
func (r *StoredResult) ItemsPath() string { return r.itemsPath }

// NumItems is the number of items of the primary array.
func (r *StoredResult) NumItems() int { return len(r.spans) }

// Item returns item i's raw JSON. It must not be modified.
func (r *StoredResult) Item(i int) []byte {
	s := r.spans[i]
	return r.text[s.start:s.end:s.end]
}

// byteAt is the byte offset of character c (0 <= c <= Len()).
func (r *StoredResult) byteAt(c int) int {
	if r.marks == nil {
		return c
	}
	i := int(r.marks[c/runeStride])
	for k := c % runeStride; k > 0; k-- {
		_, size := utf8.DecodeRune(r.text[i:])
		i += size
	}
	return i
}

// charAt is the character offset of byte b, which begins a character.
func (r *StoredResult) charAt(b int) int {
	if r.marks == nil {
		return b
	}
	// The last mark at or before b.
	lo, hi := 0, len(r.marks)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if int(r.marks[mid]) <= b {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo*runeStride + utf8.RuneCount(r.text[r.marks[lo]:b])
}

// Size is what the record holds in memory, in bytes, as the stores count
// it against their bounds.
func (r *StoredResult) Size() int64 {
	return int64(len(r.text)+8*len(r.spans)+4*len(r.marks)+len(r.Tool)+len(r.itemsPath)) + 128
}

// recordMagic begins a serialised StoredResult: version 2 adds the set's
// verdict; version 1 records (without it) are still read.
var (
	recordMagic   = []byte("trawl.result.2\n")
	recordMagicV1 = []byte("trawl.result.1\n")
)

// completions numbers the completions in a serialised record.
var completions = []Completion{"", Complete, Partial, Unstable, SingleResponse}

// MarshalBinary serialises the record (for a store outside the process).
func (r *StoredResult) MarshalBinary() ([]byte, error) {
	out := make([]byte, 0, len(recordMagic)+len(r.text)+8*len(r.spans)+64)
	out = append(out, recordMagic...)
	out = binary.AppendUvarint(out, uint64(len(r.Tool)))
	out = append(out, r.Tool...)
	out = binary.AppendVarint(out, r.Created.UnixNano())
	out = binary.AppendUvarint(out, uint64(len(r.itemsPath)))
	out = append(out, r.itemsPath...)
	has := byte(0)
	if r.hasItems {
		has = 1
	}
	out = append(out, has)
	code := byte(0)
	for i, c := range completions {
		if c == r.Set.Completion {
			code = byte(i)
		}
	}
	flags := byte(0)
	if r.Set.Resumed {
		flags |= 1
	}
	if r.Set.FirstPageOnly {
		flags |= 2
	}
	if r.Set.ReportedTotal != nil {
		flags |= 4
	}
	out = append(out, code, flags)
	out = binary.AppendUvarint(out, uint64(r.Set.Records))
	if r.Set.ReportedTotal != nil {
		out = binary.AppendVarint(out, int64(*r.Set.ReportedTotal))
	}
	out = binary.AppendUvarint(out, uint64(len(r.spans)))
	last := uint32(0)
	for _, s := range r.spans {
		out = binary.AppendUvarint(out, uint64(s.start-last))
		out = binary.AppendUvarint(out, uint64(s.end-s.start))
		last = s.end
	}
	out = binary.AppendUvarint(out, uint64(len(r.text)))
	return append(out, r.text...), nil
}

// UnmarshalBinary restores a record serialised by MarshalBinary. It checks
// every bound, so corrupt input is an error, never a panic.
func (r *StoredResult) UnmarshalBinary(data []byte) error {
	bad := func(what string) error { return fmt.Errorf("stored result: corrupt record: %s", what) }
	v2 := bytes.HasPrefix(data, recordMagic)
	if !v2 && !bytes.HasPrefix(data, recordMagicV1) {
		return bad("not a stored result")
	}
	d := data[len(recordMagic):]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(d)
		if n <= 0 {
			return 0, false
		}
		d = d[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(d)) {
			return "", false
		}
		s := string(d[:n])
		d = d[n:]
		return s, true
	}
	var out StoredResult
	var ok bool
	if out.Tool, ok = str(); !ok {
		return bad("tool")
	}
	created, n := binary.Varint(d)
	if n <= 0 {
		return bad("time")
	}
	d = d[n:]
	out.Created = time.Unix(0, created)
	if out.itemsPath, ok = str(); !ok {
		return bad("items path")
	}
	if len(d) < 1 || d[0] > 1 {
		return bad("items flag")
	}
	out.hasItems = d[0] == 1
	d = d[1:]
	if v2 {
		if len(d) < 2 || int(d[0]) >= len(completions) || d[1] > 7 {
			return bad("set verdict")
		}
		out.Set.Completion = completions[d[0]]
		flags := d[1]
		d = d[2:]
		out.Set.Resumed, out.Set.FirstPageOnly = flags&1 != 0, flags&2 != 0
		records, ok := uv()
		if !ok || records > maxStored {
			return bad("set records")
		}
		out.Set.Records = int(records)
		if flags&4 != 0 {
			total, n := binary.Varint(d)
			if n <= 0 || total < 0 || total > maxStored {
				return bad("set total")
			}
			d = d[n:]
			out.Set.ReportedTotal = intPtr(int(total))
		}
	}
	count, ok := uv()
	if !ok || count > uint64(len(d)/2) {
		return bad("item count")
	}
	out.spans = make([]span, count)
	last := uint64(0)
	for i := range out.spans {
		gap, ok1 := uv()
		size, ok2 := uv()
		if !ok1 || !ok2 || gap > maxStored || size > maxStored {
			return bad("item bounds")
		}
		start := last + gap
		end := start + size
		if end > maxStored {
			return bad("item bounds")
		}
		out.spans[i] = span{uint32(start), uint32(end)}
		last = end
	}
	textLen, ok := uv()
	if !ok || textLen != uint64(len(d)) {
		return bad("text length")
	}
	if last > textLen {
		return bad("items beyond the text")
	}
	if !utf8.Valid(d) {
		return bad("text is not UTF-8")
	}
	out.text = append([]byte(nil), d...)
	out.index()
	*r = out
	return nil
}

// MemoryStoreOptions configure the in-memory stores. The zero value is
// ready to use.
type MemoryStoreOptions struct {
	// MaxBytes bounds the total size of what the store holds; the oldest
	// entries are evicted first to make room. Zero means 256 MiB.
	MaxBytes int64
	// Now is the clock that decides expiry. Nil means time.Now.
	Now func() time.Time
	// CleanupInterval is how often entries past their time are dropped
	// from memory even if nobody asks for them again. Zero means one
	// minute.
	CleanupInterval time.Duration
}

// MemoryResultStore is the embedded ResultStore: records live in process
// memory, bounded in total bytes (oldest evicted first), until their
// expiry by the injected clock. Expired and evicted keys are remembered
// (the last 10,000) so that they answer ErrResultExpired rather than
// ErrResultNotFound.
type MemoryResultStore struct {
	m *memory[*StoredResult]
}

// NewMemoryResultStore returns an empty in-memory result store.
func NewMemoryResultStore(opts MemoryStoreOptions) *MemoryResultStore {
	return &MemoryResultStore{m: newMemory[*StoredResult](opts, 10000)}
}

// Put implements ResultStore.
func (s *MemoryResultStore) Put(_ context.Context, key string, rec *StoredResult, expires time.Time) error {
	if !s.m.put(key, rec, rec.Size(), expires) {
		return ErrResultTooLarge
	}
	return nil
}

// Get implements ResultStore.
func (s *MemoryResultStore) Get(_ context.Context, key string) (*StoredResult, error) {
	rec, _, st := s.m.get(key)
	switch st {
	case memExpired:
		return nil, ErrResultExpired
	case memMissing:
		return nil, ErrResultNotFound
	}
	return rec, nil
}

// Bytes is the total size of the records held.
func (s *MemoryResultStore) Bytes() int64 { return s.m.size() }

// Len is how many records are held.
func (s *MemoryResultStore) Len() int { return s.m.len() }

// memory is the in-process container behind both memory stores: go-cache
// holds the values (its janitor frees what nobody asks for again), while
// expiry is decided by the injected clock on every read, and a FIFO list
// keeps the total size within bounds.
type memory[V any] struct {
	now      func() time.Time
	maxBytes int64
	items    *gocache.Cache // key → *memEntry[V]

	mu    sync.Mutex
	bytes int64
	order *list.List              // of *memEntry[V], oldest first
	index map[string]*memEntry[V] // what items should hold, for bookkeeping
	gone  map[string]bool         // tombstones: expired or evicted keys
	ring  []string                // tombstones in order, to bound them
	next  int                     // next slot of ring
}

type memEntry[V any] struct {
	key     string
	value   V
	size    int64
	expires time.Time
	elem    *list.Element
	removed atomic.Bool // set under memory.mu; read without it by the eviction callback
}

type memState int

const (
	memFound memState = iota
	memMissing
	memExpired
)

// cleanupGrace is how long past its expiry an entry stays in go-cache:
// expiry itself is decided by the injected clock, go-cache only frees.
const cleanupGrace = time.Minute

func newMemory[V any](opts MemoryStoreOptions, tombstones int) *memory[V] {
	m := &memory[V]{
		now:      opts.Now,
		maxBytes: opts.MaxBytes,
		order:    list.New(),
		index:    map[string]*memEntry[V]{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.maxBytes <= 0 {
		m.maxBytes = 256 << 20
	}
	interval := opts.CleanupInterval
	if interval <= 0 {
		interval = time.Minute
	}
	if tombstones > 0 {
		m.gone = map[string]bool{}
		m.ring = make([]string, tombstones)
	}
	m.items = gocache.New(gocache.NoExpiration, interval)
	m.items.OnEvicted(m.evicted)
	return m
}

// put stores value; false when size alone is beyond the bound.
func (m *memory[V]) put(key string, value V, size int64, expires time.Time) bool {
	if size > m.maxBytes {
		return false
	}
	keep := expires.Sub(m.now())
	if keep < 0 {
		keep = 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.index[key]; old != nil {
		m.removeLocked(old, false)
	}
	for m.bytes+size > m.maxBytes {
		m.removeLocked(m.order.Front().Value.(*memEntry[V]), true)
	}
	e := &memEntry[V]{key: key, value: value, size: size, expires: expires}
	e.elem = m.order.PushBack(e)
	m.index[key] = e
	m.bytes += size
	delete(m.gone, key)
	m.items.Set(key, e, keep+cleanupGrace)
	return true
}

// get returns the value under key and when it expires.
func (m *memory[V]) get(key string) (V, time.Time, memState) {
	var zero V
	if v, ok := m.items.Get(key); ok {
		e := v.(*memEntry[V])
		if m.now().Before(e.expires) {
			return e.value, e.expires, memFound
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.index[key]; e != nil {
		if m.now().Before(e.expires) {
			return e.value, e.expires, memFound // put again since the read above
		}
		m.removeLocked(e, true)
		return zero, time.Time{}, memExpired
	}
	if m.gone[key] {
		return zero, time.Time{}, memExpired
	}
	return zero, time.Time{}, memMissing
}

func (m *memory[V]) size() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// len is how many records are held.
func (m *memory[V]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.index)
}

// removeLocked drops e from the bookkeeping and from go-cache; tomb
// remembers its key as expired.
func (m *memory[V]) removeLocked(e *memEntry[V], tomb bool) {
	if e.removed.Load() {
		return
	}
	e.removed.Store(true)
	m.order.Remove(e.elem)
	m.bytes -= e.size
	if m.index[e.key] == e {
		delete(m.index, e.key)
		// go-cache holds e (or nothing, if its janitor came first); the
		// eviction callback this triggers sees e.removed and returns.
		m.items.Delete(e.key)
	}
	if tomb && m.gone != nil {
		if old := m.ring[m.next]; old != "" {
			delete(m.gone, old)
		}
		m.ring[m.next] = e.key
		m.next = (m.next + 1) % len(m.ring)
		m.gone[e.key] = true
	}
}

// evicted is go-cache's eviction callback: its janitor dropped an entry
// past its time, or removeLocked deleted one (already accounted for).
func (m *memory[V]) evicted(_ string, v any) {
	e, ok := v.(*memEntry[V])
	if !ok || e.removed.Load() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(e, true)
}
