package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is what every error of Parse and Validate (and of Run given
// an invalid workflow) matches with errors.Is: the workflow itself is at
// fault, not the server.
var ErrInvalid = errors.New("invalid workflow")

// maxProblems bounds the problems one error lists.
const maxProblems = 20

// InvalidError lists what is wrong with a workflow definition.
type InvalidError struct {
	Problems []Problem
}

func invalid(ps ...Problem) *InvalidError {
	return &InvalidError{Problems: ps}
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == maxProblems {
			fmt.Fprintf(&b, "; … and %d more problems", len(e.Problems)-maxProblems)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Problem is one thing wrong with a definition, e.g.
//
//	steps[2] (fetch): loop.for_each.key "property" is not a parameter of acme.list_property_bookings; parameters: page, per_page, property_id, status
type Problem struct {
	// Step is the index of the step at fault; -1 for the workflow itself.
	Step int
	// StepID is that step's id, when it has one.
	StepID string
	// Field is the dotted path of the field at fault within the step (or
	// the workflow), such as "loop.for_each.key" or "if.ref"; "" for the
	// step as a whole.
	Field string
	// Message says what is wrong; it reads on from Field.
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Step >= 0 {
		fmt.Fprintf(&b, "steps[%d]", p.Step)
		if p.StepID != "" {
			fmt.Fprintf(&b, " (%s)", p.StepID)
		}
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteByte(' ')
	}
	b.WriteString(p.Message)
	return b.String()
}
