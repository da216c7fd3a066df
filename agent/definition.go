package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// Definition is an agent as config and the agents API describe it.
type Definition struct {
	ID     string `json:"id" yaml:"id"`
	Name   string `json:"name,omitempty" yaml:"name"`
	System string `json:"system,omitempty" yaml:"system"`
	// Model names the model for this agent; empty means the deployment's.
	Model string `json:"model,omitempty" yaml:"model"`
	// MaxSteps bounds the steps of one turn. Zero means 12.
	MaxSteps int `json:"max_steps,omitempty" yaml:"max_steps"`
	// ViewChars overrides the deployment's size-guard budget for what one
	// tool result may put in front of the model. Zero: the deployment's.
	ViewChars int `json:"view_chars,omitempty" yaml:"view_chars"`
	// Context is the budget of what one step sends the model. Nil: the
	// model's known context window (see ContextWindow).
	Context *ContextConfig `json:"context,omitempty" yaml:"context"`
	// Rows is how tool results' rows reach the model: "objects" (the
	// default: JSON objects, as stored) or "compact" (uniform rows as a
	// header of field names and one text of the rows, values separated by
	// commas and rows by semicolons, loop.CompactRows; the model is told
	// the layout in one line). The stored result, the
	// stream's tool output and the Studio keep the objects.
	Rows       RowLayout `json:"rows,omitempty" yaml:"rows"`
	AgentTools []Binding `json:"agentTools" yaml:"agentTools"`
	// Approval says, per effect class, which calls wait for a human's
	// yes before they run (a binding's own approval wins).
	Approval *ApprovalPolicy `json:"approval,omitempty" yaml:"approval"`
	// AnswerCheck says what a turn does with a final answer that states
	// a count, a total or "all" over a call whose verdict was not
	// complete (see agent/claims): off, warn (stream a data-claim-check
	// part after it) or revise (one more step, told why, so the answer
	// hedges). "" is warn.
	AnswerCheck AnswerCheck `json:"answer_check,omitempty" yaml:"answer_check"`
	// Deleted marks a stored tombstone: an agent from the config file
	// deleted through the API stays deleted.
	Deleted bool `json:"deleted,omitempty" yaml:"-"`
}

// RowLayout is how tool results' rows reach the model (Definition.Rows).
type RowLayout string

const (
	RowsObjects RowLayout = "objects" // JSON objects, as stored (also the empty value)
	RowsCompact RowLayout = "compact" // a line of field names and one text of the rows (loop.CompactRows)
)

// Binding is one entry of an agent's tool list: a single tool
// (ToolID, with ProviderID) or a whole connected-app toolkit (Toolkit).
type Binding struct {
	ToolID     string `json:"tool_id,omitempty" yaml:"tool_id"`
	ProviderID string `json:"provider_id,omitempty" yaml:"provider_id"`
	Toolkit    string `json:"toolkit,omitempty" yaml:"toolkit"`
	// LoopResponses adds the reserved arguments (_all_pages, _fields, …).
	LoopResponses bool `json:"loop_responses,omitempty" yaml:"loop_responses"`
	// DatasetTTLHours overrides the cache TTL of complete walks. Zero:
	// 24 h for organization credentials, 1 h for runtime ones.
	DatasetTTLHours float64 `json:"dataset_ttl_hours,omitempty" yaml:"dataset_ttl_hours"`
	// Discovery: auto (default), true (always pooled), false (always direct).
	Discovery Discovery `json:"discovery,omitempty" yaml:"discovery"`
	// Limits override the deployment's walk budgets for this binding.
	Limits *Limits `json:"limits,omitempty" yaml:"limits"`
	// Effect overrides the tool's effect (read, write, destructive).
	Effect tools.Effect `json:"effect,omitempty" yaml:"effect"`
	// Bulk lets a write take _for_each, at most BulkValues values (zero:
	// 10). Without it a write changes one object per call.
	Bulk       bool `json:"bulk,omitempty" yaml:"bulk"`
	BulkValues int  `json:"bulk_values,omitempty" yaml:"bulk_values"`
	// Approval "required" makes every call of the binding's tools wait
	// for a human's yes; "auto" never waits; "" follows the agent's
	// approval per effect.
	Approval Approval `json:"approval,omitempty" yaml:"approval"`
}

// Approval is whether a call waits for a human: "required" or "auto"
// ("" is auto unless a level above says otherwise).
type Approval string

const (
	ApprovalAuto     Approval = "auto"
	ApprovalRequired Approval = "required"
)

func (a Approval) valid() bool { return a == "" || a == ApprovalAuto || a == ApprovalRequired }

// AnswerCheck is an agent's answer_check: "off", "warn" or "revise"
// ("" is warn).
type AnswerCheck string

const (
	AnswerCheckOff    AnswerCheck = "off"
	AnswerCheckWarn   AnswerCheck = "warn"
	AnswerCheckRevise AnswerCheck = "revise"
)

func (a AnswerCheck) valid() bool {
	return a == "" || a == AnswerCheckOff || a == AnswerCheckWarn || a == AnswerCheckRevise
}

// ApprovalPolicy is an agent's approval per effect class, e.g.
// {destructive: required, write: auto}.
type ApprovalPolicy struct {
	Read        Approval `json:"read,omitempty" yaml:"read"`
	Write       Approval `json:"write,omitempty" yaml:"write"`
	Destructive Approval `json:"destructive,omitempty" yaml:"destructive"`
}

// For is the policy's approval for effect e.
func (p *ApprovalPolicy) For(e tools.Effect) Approval {
	if p == nil {
		return ""
	}
	switch e {
	case tools.EffectWrite:
		return p.Write
	case tools.EffectDestructive:
		return p.Destructive
	}
	return p.Read
}

// Requires reports whether a call of a tool of effect e under binding b
// waits for a human's approval: the binding's setting wins, then the
// agent's for the effect.
func (d *Definition) Requires(b Binding, e tools.Effect) bool {
	if b.Approval != "" {
		return b.Approval == ApprovalRequired
	}
	return d.Approval.For(e) == ApprovalRequired
}

// Limits are walk budgets; zero fields keep the level above.
type Limits struct {
	Pages         int     `json:"pages,omitempty" yaml:"pages"`
	Requests      int     `json:"requests,omitempty" yaml:"requests"`
	Items         int     `json:"items,omitempty" yaml:"items"`
	Bytes         int64   `json:"bytes,omitempty" yaml:"bytes"`
	Seconds       float64 `json:"seconds,omitempty" yaml:"seconds"`
	ForEachValues int     `json:"for_each_values,omitempty" yaml:"for_each_values"`
	// Concurrency bounds the requests one walk has in flight when it may
	// fetch pages ahead (paginate.Budget.Concurrency): 0 adaptive, 1 one
	// at a time, at most paginate.MaxConcurrency.
	Concurrency int `json:"concurrency,omitempty" yaml:"concurrency"`
}

// Budget is l as a walk budget.
func (l Limits) Budget() paginate.Budget {
	return paginate.Budget{Pages: l.Pages, Requests: l.Requests, Items: l.Items, Bytes: l.Bytes,
		Time: time.Duration(l.Seconds * float64(time.Second)), ForEachValues: l.ForEachValues, Concurrency: l.Concurrency}
}

// Discovery says whether a binding's tools go to the model directly or
// behind search_tools. The zero value is DiscoveryAuto.
type Discovery string

const (
	DiscoveryAuto   Discovery = ""      // follow the 15-tool budget rule
	DiscoveryPooled Discovery = "true"  // always behind search_tools
	DiscoveryDirect Discovery = "false" // always direct, counted against the budget
)

func parseDiscovery(s string) (Discovery, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return DiscoveryAuto, nil
	case "true":
		return DiscoveryPooled, nil
	case "false":
		return DiscoveryDirect, nil
	}
	return "", fmt.Errorf("discovery must be auto, true or false, not %q", s)
}

// UnmarshalJSON accepts true, false, "auto", "true" and "false".
func (d *Discovery) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var v bool
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("discovery must be auto, true or false")
		}
		s = strconv.FormatBool(v)
	}
	v, err := parseDiscovery(s)
	*d = v
	return err
}

// MarshalJSON writes "auto", true or false.
func (d Discovery) MarshalJSON() ([]byte, error) {
	switch d {
	case DiscoveryPooled:
		return []byte("true"), nil
	case DiscoveryDirect:
		return []byte("false"), nil
	}
	return []byte(`"auto"`), nil
}

// UnmarshalYAML accepts the same values as UnmarshalJSON.
func (d *Discovery) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDiscovery(n.Value)
	*d = v
	return err
}

// Validate checks a definition on its own (tool ids are checked against
// the catalog by the caller).
func (d *Definition) Validate() error {
	if d.ID == "" {
		return &FieldError{Field: "id", Msg: "is required"}
	}
	if !validID(d.ID) {
		return &FieldError{Field: "id", Msg: "may hold only letters, digits, '-', '_' and '.' (at most 64)"}
	}
	if d.MaxSteps < 0 || d.MaxSteps > 100 {
		return &FieldError{Field: "max_steps", Msg: "must be between 1 and 100"}
	}
	if d.ViewChars < 0 {
		return &FieldError{Field: "view_chars", Msg: "must not be negative"}
	}
	if !d.AnswerCheck.valid() {
		return &FieldError{Field: "answer_check", Msg: "must be off, warn or revise"}
	}
	if d.Rows != RowsObjects && d.Rows != RowsCompact && d.Rows != "" {
		return &FieldError{Field: "rows", Msg: fmt.Sprintf("must be objects or compact, not %q", string(d.Rows))}
	}
	if err := d.Context.validate(); err != nil {
		return err
	}
	for i, b := range d.AgentTools {
		f := fmt.Sprintf("agentTools[%d]", i)
		switch {
		case b.ToolID == "" && b.Toolkit == "":
			return &FieldError{Field: f, Msg: "needs tool_id or toolkit"}
		case b.ToolID != "" && b.Toolkit != "":
			return &FieldError{Field: f, Msg: "takes tool_id or toolkit, not both"}
		case b.DatasetTTLHours < 0:
			return &FieldError{Field: f + ".dataset_ttl_hours", Msg: "must not be negative"}
		case b.BulkValues < 0 || b.BulkValues > 50:
			return &FieldError{Field: f + ".bulk_values", Msg: "must be between 1 and 50"}
		case !b.Approval.valid():
			return &FieldError{Field: f + ".approval", Msg: "must be required or auto"}
		}
		if b.Effect != "" {
			if _, err := tools.ParseEffect(string(b.Effect)); err != nil {
				return &FieldError{Field: f + ".effect", Msg: "must be read, write or destructive"}
			}
		}
	}
	if p := d.Approval; p != nil {
		for i, a := range []Approval{p.Read, p.Write, p.Destructive} {
			if !a.valid() {
				return &FieldError{Field: "approval." + []string{"read", "write", "destructive"}[i], Msg: "must be required or auto"}
			}
		}
	}
	return nil
}

// FieldError names the field of a definition that is wrong.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Msg }

func validID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
