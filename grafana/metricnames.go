package grafana

import (
	"fmt"
	"sort"
	"strings"
)

// groupingKeywords are followed by a parenthesized list of label names, not metric names.
var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// nonMetricWords are PromQL keywords and literals that look like identifiers.
var nonMetricWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
}

// MetricNames returns the metric names a PromQL expression selects, sorted and unique. It is a
// small lexer, not a full parser: it skips strings, label matchers ({...}), ranges ([...]),
// numbers and durations, function and aggregation names (an identifier followed by "("), and the
// label lists after by/without/on/ignoring/group_left/group_right. A selector written only as
// {__name__="..."} is reported as an error, since its name cannot be checked here.
func MetricNames(expr string) ([]string, error) {
	l := lexer{s: expr}
	seen := map[string]bool{}
	for l.i < len(l.s) {
		name, err := l.next()
		if err != nil {
			return nil, fmt.Errorf("%w in %q", err, expr)
		}
		if name != "" {
			seen[name] = true
		}
	}
	if l.depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

type lexer struct {
	s     string
	i     int
	depth int // open parentheses
}

// next consumes one token and returns a metric name when the token is one.
func (l *lexer) next() (string, error) {
	c := l.s[l.i]
	switch {
	case c == '"' || c == '\'' || c == '`':
		return "", l.skipString(c)
	case c == '{':
		bare := !isIdentChar(l.prevNonSpace())
		start := l.i
		if err := l.skipBalanced('{', '}'); err != nil {
			return "", err
		}
		if bare && strings.Contains(l.s[start:l.i], "__name__") {
			return "", fmt.Errorf("selector without a metric name")
		}
		return "", nil
	case c == '[':
		return "", l.skipBalanced('[', ']')
	case c >= '0' && c <= '9' || c == '.':
		for l.i < len(l.s) && (isIdentChar(l.s[l.i]) || l.s[l.i] == '.') {
			l.i++
		}
		return "", nil
	case isIdentStart(c):
		return l.ident()
	case c == '(':
		l.depth++
	case c == ')':
		l.depth--
		if l.depth < 0 {
			return "", fmt.Errorf("unbalanced )")
		}
	}
	l.i++
	return "", nil
}

func (l *lexer) ident() (string, error) {
	start := l.i
	for l.i < len(l.s) && isIdentChar(l.s[l.i]) {
		l.i++
	}
	word := l.s[start:l.i]
	lower := strings.ToLower(word)
	if groupingKeywords[lower] {
		l.skipSpace()
		if l.i < len(l.s) && l.s[l.i] == '(' {
			return "", l.skipBalanced('(', ')')
		}
		return "", nil
	}
	if nonMetricWords[lower] {
		return "", nil
	}
	l.skipSpace()
	if l.i < len(l.s) && l.s[l.i] == '(' {
		return "", nil // function or aggregation
	}
	if l.aggregationModifier() {
		return "", nil // aggregation written as sum by (x) (...)
	}
	return word, nil
}

// aggregationModifier reports whether a by/without (...) clause followed by "(" comes next, which
// makes the word before it an aggregation; it consumes the clause when so.
func (l *lexer) aggregationModifier() bool {
	start := l.i
	for l.i < len(l.s) && isIdentChar(l.s[l.i]) {
		l.i++
	}
	word := strings.ToLower(l.s[start:l.i])
	if word == "by" || word == "without" {
		l.skipSpace()
		if l.i < len(l.s) && l.s[l.i] == '(' && l.skipBalanced('(', ')') == nil {
			l.skipSpace()
			if l.i < len(l.s) && l.s[l.i] == '(' {
				return true
			}
		}
	}
	l.i = start
	return false
}

func (l *lexer) skipString(quote byte) error {
	for l.i++; l.i < len(l.s); l.i++ {
		switch l.s[l.i] {
		case '\\':
			if quote != '`' {
				l.i++
			}
		case quote:
			l.i++
			return nil
		}
	}
	return fmt.Errorf("unterminated string")
}

func (l *lexer) skipBalanced(open, close byte) error {
	depth := 0
	for l.i < len(l.s) {
		switch c := l.s[l.i]; {
		case c == '"' || c == '\'' || c == '`':
			if err := l.skipString(c); err != nil {
				return err
			}
			continue
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				l.i++
				return nil
			}
		}
		l.i++
	}
	return fmt.Errorf("unbalanced %c", open)
}

func (l *lexer) skipSpace() {
	for l.i < len(l.s) && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
		l.i++
	}
}

func (l *lexer) prevNonSpace() byte {
	for j := l.i - 1; j >= 0; j-- {
		if strings.IndexByte(" \t\r\n", l.s[j]) < 0 {
			return l.s[j]
		}
	}
	return 0
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
