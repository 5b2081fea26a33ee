package tool

// Wrap returns a set of the same tools, each replaced by wrap(t): for
// tracing or metering calls. wrap must keep the tool's Def (its name and
// parameters), so the set reuses s's compiled schemas instead of compiling
// them again. A nil s gives nil.
func (s *Set) Wrap(wrap func(Tool) Tool) *Set {
	if s == nil {
		return nil
	}
	out := &Set{byName: s.byName, schemas: s.schemas, defs: s.defs, tools: make([]Tool, len(s.tools))}
	for i, t := range s.tools {
		out.tools[i] = wrap(t)
	}
	return out
}
