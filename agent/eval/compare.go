package eval

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/agent/claims"
)

// Comparison is a run against a baseline report: what changed, case by
// case (cases are matched by id; each case's first sample is compared
// for calls and verdicts, the means of its samples for tokens and
// requests).
type Comparison struct {
	Baseline     string     `json:"baseline"` // the baseline's folder, as given
	NewlyFailing []string   `json:"newlyFailing"`
	NewlyPassing []string   `json:"newlyPassing"`
	Added        []string   `json:"added,omitempty"`   // cases the baseline lacks
	Removed      []string   `json:"removed,omitempty"` // cases the run lacks
	Cases        []CaseDiff `json:"cases"`             // the cases that differ
	// TokensDelta and RequestsDelta are the run's totals minus the
	// baseline's, over the cases both hold.
	TokensDelta   int `json:"tokensDelta"`
	RequestsDelta int `json:"requestsDelta"`
	// Regressed: a case newly failing or with a lower pass rate, or a
	// call's verdict that supported a count before and does not now.
	Regressed bool `json:"regressed"`
}

// CaseDiff is what changed in one case.
type CaseDiff struct {
	ID               string        `json:"id"`
	BaselinePassRate float64       `json:"baselinePassRate"`
	PassRate         float64       `json:"passRate"`
	Verdicts         []VerdictDiff `json:"verdicts,omitempty"`
	// BaselineTools and Tools are the calls' names, when they differ.
	BaselineTools []string `json:"baselineTools,omitempty"`
	Tools         []string `json:"tools,omitempty"`
	TokensDelta   int      `json:"tokensDelta"`
	RequestsDelta int      `json:"requestsDelta"`
	// Worse: this case regressed.
	Worse bool `json:"worse"`
}

// VerdictDiff is a call whose verdict changed: the call at Position of
// the run (0-based, in order), by name.
type VerdictDiff struct {
	Position int            `json:"position"`
	Tool     string         `json:"tool"`
	Baseline claims.Verdict `json:"baseline"`
	Verdict  claims.Verdict `json:"verdict"`
}

// Compare compares r with base, sets r.Comparison and returns it.
func (r *Report) Compare(base *Report, name string) *Comparison {
	cmp := &Comparison{Baseline: name, NewlyFailing: []string{}, NewlyPassing: []string{}, Cases: []CaseDiff{}}
	before := map[string]*CaseResult{}
	for _, c := range base.Cases {
		before[c.ID] = c
	}
	now := map[string]bool{}
	for _, c := range r.Cases {
		now[c.ID] = true
		b, ok := before[c.ID]
		if !ok {
			cmp.Added = append(cmp.Added, c.ID)
			continue
		}
		d := CaseDiff{ID: c.ID, BaselinePassRate: b.PassRate, PassRate: c.PassRate}
		switch {
		case b.Passed && !c.Passed:
			cmp.NewlyFailing = append(cmp.NewlyFailing, c.ID)
		case !b.Passed && c.Passed:
			cmp.NewlyPassing = append(cmp.NewlyPassing, c.ID)
		}
		d.Worse = c.PassRate < b.PassRate
		bs, cs := first(b), first(c)
		bt, ct := callNames(bs), callNames(cs)
		if !slices.Equal(bt, ct) {
			d.BaselineTools, d.Tools = orEmpty(bt), orEmpty(ct)
		}
		for i := range min(len(bs.ToolCalls), len(cs.ToolCalls)) {
			bc, cc := bs.ToolCalls[i], cs.ToolCalls[i]
			if bc.Name != cc.Name || bc.Verdict == cc.Verdict {
				continue
			}
			d.Verdicts = append(d.Verdicts, VerdictDiff{Position: i, Tool: cc.Name, Baseline: bc.Verdict, Verdict: cc.Verdict})
			if bc.Verdict.Supports() && !cc.Verdict.Supports() {
				d.Worse = true
			}
		}
		d.TokensDelta = meanTokens(c) - meanTokens(b)
		d.RequestsDelta = meanRequests(c) - meanRequests(b)
		cmp.TokensDelta += d.TokensDelta
		cmp.RequestsDelta += d.RequestsDelta
		cmp.Regressed = cmp.Regressed || d.Worse
		if d.Worse || d.PassRate != d.BaselinePassRate || len(d.Verdicts) > 0 || d.Tools != nil || d.TokensDelta != 0 || d.RequestsDelta != 0 {
			cmp.Cases = append(cmp.Cases, d)
		}
	}
	for _, c := range base.Cases {
		if !now[c.ID] {
			cmp.Removed = append(cmp.Removed, c.ID)
		}
	}
	cmp.Regressed = cmp.Regressed || len(cmp.NewlyFailing) > 0
	r.Comparison = cmp
	return cmp
}

// first is a case's first sample (an empty one when it has none).
func first(c *CaseResult) *Sample {
	if len(c.Samples) == 0 || c.Samples[0] == nil {
		return &Sample{}
	}
	return c.Samples[0]
}

func callNames(s *Sample) []string {
	var out []string
	for _, c := range s.ToolCalls {
		out = append(out, c.Name)
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func meanTokens(c *CaseResult) int {
	n, sum := 0, 0
	for _, s := range c.Samples {
		if s != nil {
			n, sum = n+1, sum+s.Tokens.Total
		}
	}
	return sum / max(n, 1)
}

func meanRequests(c *CaseResult) int {
	n, sum := 0, 0
	for _, s := range c.Samples {
		if s != nil {
			n, sum = n+1, sum+s.UpstreamRequests
		}
	}
	return sum / max(n, 1)
}

// summary words the comparison for the table.
func (c *Comparison) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "against %s: %d newly failing%s, %d newly passing%s; upstream requests %+d, tokens %+d",
		c.Baseline, len(c.NewlyFailing), paren(c.NewlyFailing), len(c.NewlyPassing), paren(c.NewlyPassing), c.RequestsDelta, c.TokensDelta)
	if c.Regressed {
		b.WriteString(" · regressed")
	}
	b.WriteString("\n")
	for _, d := range c.Cases {
		for _, v := range d.Verdicts {
			fmt.Fprintf(&b, "  %s: %s (call %d) was %s, now %s\n", d.ID, v.Tool, v.Position+1, v.Baseline, v.Verdict)
		}
		if d.Tools != nil {
			fmt.Fprintf(&b, "  %s: tool calls were %s, now %s\n", d.ID, orNone(d.BaselineTools), orNone(d.Tools))
		}
	}
	for _, id := range c.Added {
		fmt.Fprintf(&b, "  %s: not in the baseline\n", id)
	}
	for _, id := range c.Removed {
		fmt.Fprintf(&b, "  %s: in the baseline, not in this run\n", id)
	}
	return b.String()
}

func paren(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, ", ") + ")"
}
