package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// Envelope is a tool result's envelope read back: the keys of DESIGN.md
// §5 that the engine, its size guard and the retrieval tools write beside
// the payload, typed. Every door that shows a result — the terminal
// chat, replays, compaction of older results, an MCP result, an eval
// runner — reads it here, with its fallbacks in one place. A key the
// result lacks leaves its field zero.
type Envelope struct {
	// Completion is how complete the result is: _boundary.completion,
	// or in a result from before the boundary statement its
	// _pagingComplete (true: Complete, false: Partial). "" when the
	// result carries neither: a plain call's result, an error, text.
	Completion Completion `json:"-"`

	// PagingComplete is _pagingComplete; nil when absent (a single
	// response carries none).
	PagingComplete  *bool            `json:"_pagingComplete"`
	LikelyMoreRows  bool             `json:"_likelyMoreRows"`
	StoppedBy       string           `json:"_stoppedBy"`
	Note            string           `json:"_note"`
	Boundary        *Boundary        `json:"_boundary"`
	ResultID        string           `json:"_resultId"`
	Cache           *CacheHit        `json:"_cache"`
	UnmatchedFields *UnmatchedFields `json:"_unmatchedFields"`
	UnmatchedFilter *UnmatchedFilter `json:"_unmatchedFilter"`
	ForEachErrors   []ForEachError   `json:"_forEachErrors"`
	ForEachSkipped  []ForEachSkip    `json:"_forEachSkipped"`
	ForEachPartial  []ForEachCut     `json:"_forEachPartial"`
	// Aggregate is `_aggregate`: the groups and metrics of an
	// _aggregate (or queryToolResult's aggregate) over every row, with
	// the set's verdict; nil without one.
	Aggregate *AggregateReport `json:"-"`
	// UnknownArgs are the arguments sent that no parameter declares,
	// which the tool's schema admits.
	UnknownArgs []string `json:"_unknownArgs"`

	// The size guard's cut: by items (ShownItems of TotalItems) or, for
	// a text or a single object, by characters.
	Truncated  bool `json:"_truncated"`
	ShownItems int  `json:"_shownItems"`
	TotalItems int  `json:"_totalItems"`
	ShownChars int  `json:"_shownChars"`
	TotalChars int  `json:"_totalChars"`
}

// UnmatchedFields is `_unmatchedFields`: the _fields paths no row has,
// the keys the rows do hold and a sample row.
type UnmatchedFields struct {
	AvailableKeys []string        `json:"availableKeys"`
	Paths         []string        `json:"paths"`
	Sample        json.RawMessage `json:"sample,omitempty"`
}

// UnmatchedFilter is `_unmatchedFilter`: the _filter fields no row has,
// and the keys the rows do hold.
type UnmatchedFilter struct {
	AvailableKeys []string `json:"availableKeys"`
	Fields        []string `json:"fields"`
}

// Looped reports whether the result carries a looping verdict: it came
// from a binding with loop_responses on (a boundary statement, or
// _pagingComplete in a result from before it).
func (e *Envelope) Looped() bool { return e.Completion != "" }

// ReadEnvelope reads the envelope of a tool result (its JSON text). A
// result that is not a JSON object (an array, text) has no envelope: the
// zero Envelope and no error. An object that does not parse, or whose
// envelope key holds the wrong type, is an error, returned with what
// could be read.
func ReadEnvelope(output []byte) (Envelope, error) {
	var e Envelope
	if query.FirstByte(output) != '{' {
		return e, nil
	}
	// Only the envelope's keys are decoded: the payload beside them
	// (every row of a walk) is skipped over, not unmarshalled.
	env := []byte{'{'}
	var aggregate []byte
	err := query.EachMember(output, func(key []byte, name string, value []byte) {
		switch {
		case name == "_aggregate":
			aggregate = value
		case strings.HasPrefix(name, "_"):
			if len(env) > 1 {
				env = append(env, ',')
			}
			env = append(env, key...)
			env = append(env, ':')
			env = append(env, value...)
		}
	})
	if err != nil {
		return e, fmt.Errorf("reading a result's envelope: %w", err)
	}
	err = json.Unmarshal(append(env, '}'), &e)
	if query.FirstByte(aggregate) == '{' {
		var aerr error
		e.Aggregate, aerr = readAggregate(aggregate)
		err = errors.Join(err, aerr)
	}
	switch {
	case e.Boundary != nil && e.Boundary.Completion != "":
		e.Completion = e.Boundary.Completion
	case e.PagingComplete != nil && *e.PagingComplete:
		e.Completion = Complete
	case e.PagingComplete != nil:
		e.Completion = Partial
	}
	if err != nil {
		return e, fmt.Errorf("reading a result's envelope: %w", err)
	}
	return e, nil
}
