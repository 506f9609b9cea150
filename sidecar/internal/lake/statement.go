package lake

import (
	"fmt"
	"strings"
)

// SplitStatements splits DuckDB SQL into statements at top-level semicolons, respecting
// 'strings', "quoted identifiers", $tag$ dollar quotes, -- and /* */ comments. Each statement
// keeps its text (without the semicolon); blank statements are dropped.
func SplitStatements(sql string) []string {
	var out []string
	start := 0
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == ';':
			out = appendStatement(out, sql[start:i])
			i++
			start = i
		default:
			i = skipToken(sql, i)
		}
	}
	return appendStatement(out, sql[start:])
}

func appendStatement(out []string, s string) []string {
	if strings.TrimSpace(stripComments(s)) == "" {
		return out
	}
	return append(out, s)
}

// stripComments removes comments (for blank checks only).
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := skipSpace(s, i)
		if j > i {
			b.WriteByte(' ')
			i = j
			continue
		}
		k := skipToken(s, i)
		b.WriteString(s[i:k])
		i = k
	}
	return b.String()
}

// skipToken returns the index after the lexical unit starting at i: a quoted string or
// identifier, a dollar-quoted string, a comment, or a single byte.
func skipToken(s string, i int) int {
	switch {
	case s[i] == '\'' || s[i] == '"':
		return skipQuoted(s, i, s[i])
	case strings.HasPrefix(s[i:], "--"):
		if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
			return i + j + 1
		}
		return len(s)
	case strings.HasPrefix(s[i:], "/*"):
		if j := strings.Index(s[i+2:], "*/"); j >= 0 {
			return i + 2 + j + 2
		}
		return len(s)
	case s[i] == '$':
		if tag, ok := dollarTag(s, i); ok {
			if j := strings.Index(s[i+len(tag):], tag); j >= 0 {
				return i + len(tag) + j + len(tag)
			}
			return len(s)
		}
	}
	return i + 1
}

func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func dollarTag(s string, i int) (string, bool) {
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		if c == '$' {
			return s[i : j+1], true
		}
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > i+1 && c >= '0' && c <= '9') {
			return "", false
		}
	}
	return "", false
}

// skipSpace skips whitespace and comments.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f':
			i++
		case strings.HasPrefix(s[i:], "--") || strings.HasPrefix(s[i:], "/*"):
			i = skipToken(s, i)
		default:
			return i
		}
	}
	return i
}

// token is one lexical token of a statement.
type token struct {
	kind byte // 'w' word, 's' string, 'i' quoted identifier, 'p' punctuation, 'o' other
	text string
}

// tokens lexes s (comments and whitespace dropped).
func tokens(s string) []token {
	var out []token
	for i := skipSpace(s, 0); i < len(s); i = skipSpace(s, i) {
		j := i
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j = skipQuoted(s, i, c)
			kind := byte('s')
			if c == '"' {
				kind = 'i'
			}
			if j-i < 2 || s[j-1] != c {
				kind = 'o' // unterminated: DuckDB will reject it, the resolver leaves it alone
			}
			out = append(out, token{kind, s[i:j]})
		case isWordByte(c):
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.' && j+1 < len(s) && isWordByte(s[j+1]) && c >= '0' && c <= '9') {
				j++
			}
			out = append(out, token{'w', s[i:j]})
		case c == '(' || c == ')' || c == ',':
			j = i + 1
			out = append(out, token{'p', s[i:j]})
		default:
			j = skipToken(s, i)
			out = append(out, token{'o', s[i:j]})
		}
		i = j
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// unquoteString returns the value of a 'string' token.
func unquoteString(t string) string {
	return strings.ReplaceAll(t[1:len(t)-1], "''", "'")
}

// unquoteIdent returns the identifier a word or "quoted identifier" token names.
func unquoteIdent(t token) string {
	if t.kind == 'i' {
		return strings.ReplaceAll(t.text[1:len(t.text)-1], `""`, `"`)
	}
	return t.text
}

// Literal is s as a DuckDB string literal.
func Literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Ident is name as a DuckDB quoted identifier.
func Ident(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Option is one ATTACH option: its upper-cased name and its value as SQL text ("" for a flag).
type Option struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// String renders the option.
func (o Option) String() string {
	if o.Value == "" {
		return o.Name
	}
	return o.Name + " " + o.Value
}

// Attach is a parsed ATTACH statement.
type Attach struct {
	IfNotExists bool
	Path        string // the path literal's value, e.g. ducklake://main
	Alias       string
	Options     []Option
}

// ParseAttach parses stmt when it is an ATTACH statement with a literal path; ok is false for
// any other statement.
func ParseAttach(stmt string) (a *Attach, ok bool, err error) {
	ts := tokens(stmt)
	if len(ts) == 0 || ts[0].kind != 'w' || !strings.EqualFold(ts[0].text, "ATTACH") {
		return nil, false, nil
	}
	i := 1
	word := func(w string) bool {
		if i < len(ts) && ts[i].kind == 'w' && strings.EqualFold(ts[i].text, w) {
			i++
			return true
		}
		return false
	}
	word("DATABASE")
	a = &Attach{}
	if word("IF") {
		if !word("NOT") || !word("EXISTS") {
			return nil, true, fmt.Errorf("ATTACH: expected IF NOT EXISTS")
		}
		a.IfNotExists = true
	}
	if i >= len(ts) || ts[i].kind != 's' {
		return nil, false, nil // a path that is not a literal: not ours to resolve
	}
	a.Path = unquoteString(ts[i].text)
	i++
	if word("AS") {
		if i >= len(ts) || (ts[i].kind != 'w' && ts[i].kind != 'i') {
			return nil, true, fmt.Errorf("ATTACH %s: expected an alias after AS", Literal(a.Path))
		}
		a.Alias = unquoteIdent(ts[i])
		i++
	}
	if i < len(ts) {
		opts, err := parseOptions(ts[i:])
		if err != nil {
			return nil, true, fmt.Errorf("ATTACH %s: %w", Literal(a.Path), err)
		}
		a.Options = opts
	}
	return a, true, nil
}

func parseOptions(ts []token) ([]Option, error) {
	if ts[0].text != "(" || ts[len(ts)-1].text != ")" {
		return nil, fmt.Errorf("unexpected %q; options go in parentheses: (READ_ONLY, OPTION value)", ts[0].text)
	}
	var out []Option
	inner := ts[1 : len(ts)-1]
	for len(inner) > 0 {
		end := 0
		depth := 0
		for end < len(inner) && !(depth == 0 && inner[end].text == ",") {
			switch inner[end].text {
			case "(":
				depth++
			case ")":
				depth--
			}
			end++
		}
		part := inner[:end]
		if len(part) == 0 || part[0].kind != 'w' {
			return nil, fmt.Errorf("expected an option name")
		}
		vals := make([]string, 0, len(part)-1)
		for _, t := range part[1:] {
			vals = append(vals, t.text)
		}
		out = append(out, Option{Name: strings.ToUpper(part[0].text), Value: strings.Join(vals, " ")})
		if end < len(inner) {
			end++
		}
		inner = inner[end:]
	}
	return out, nil
}

// Render renders the ATTACH statement of path with alias and options.
func Render(ifNotExists bool, path, alias string, opts []Option) string {
	var b strings.Builder
	b.WriteString("ATTACH ")
	if ifNotExists {
		b.WriteString("IF NOT EXISTS ")
	}
	b.WriteString(Literal(path))
	b.WriteString(" AS ")
	b.WriteString(Ident(alias))
	if len(opts) > 0 {
		parts := make([]string, len(opts))
		for i, o := range opts {
			parts[i] = o.String()
		}
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// withoutOptions drops the options named in names.
func withoutOptions(opts []Option, names ...string) []Option {
	var out []Option
	for _, o := range opts {
		drop := false
		for _, n := range names {
			if o.Name == n {
				drop = true
			}
		}
		if !drop {
			out = append(out, o)
		}
	}
	return out
}

func hasOption(opts []Option, name string) bool {
	for _, o := range opts {
		if o.Name == name && !strings.EqualFold(o.Value, "false") {
			return true
		}
	}
	return false
}
