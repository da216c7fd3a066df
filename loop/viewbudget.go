package loop

// ViewBudget is the engine's size-guard budget for one tool result, in
// characters: Options.ViewChars, or DefaultViewBudget. A caller that
// knows less room is left (an agent's context) passes a smaller
// Call.ViewChars.
func (e *Engine) ViewBudget() int { return Guard{Budget: e.opt.ViewChars}.budget() }

// Budget is what one call of a retrieval tool returns at most, in
// characters (RetrievalOptions.Budget, or DefaultViewBudget).
func (r *Retrieval) Budget() int { return r.guard.budget() }
