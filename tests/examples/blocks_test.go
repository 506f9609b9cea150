package examples_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Modes of a SQL block (the info string after ```sql).
const (
	modeRun   = "run"   // ```sql
	modeFails = "fails" // ```sql fails: <why>
	modeNoRun = "norun" // ```sql norun: <why>
)

// block is one fenced SQL block of a Markdown file.
type block struct {
	File   string
	Line   int // of the opening fence
	Mode   string
	Reason string
	SQL    string
}

func (b block) where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// parseBlocks returns the ```sql blocks of a Markdown text, in order. Other fences (```bash,
// plain ```) are skipped. An info string other than the three modes is an error.
func parseBlocks(file, text string) ([]block, error) {
	var out []block
	var cur *block
	var body []string
	inOther := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case cur != nil && fence:
			cur.SQL = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur, body = nil, nil
		case cur != nil:
			body = append(body, line)
		case inOther && fence:
			inOther = false
		case fence:
			info := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "```"))
			lang, rest, _ := strings.Cut(info, " ")
			if lang != "sql" {
				inOther = true
				continue
			}
			b, err := blockMode(file, n, strings.TrimSpace(rest))
			if err != nil {
				return nil, err
			}
			cur = &b
		}
	}
	if cur != nil || inOther {
		return nil, fmt.Errorf("%s: a code block is not closed", file)
	}
	return out, sc.Err()
}

func blockMode(file string, line int, rest string) (block, error) {
	b := block{File: file, Line: line, Mode: modeRun}
	if rest == "" {
		return b, nil
	}
	mode, reason, ok := strings.Cut(rest, ":")
	mode, reason = strings.TrimSpace(mode), strings.TrimSpace(reason)
	if !ok || (mode != modeFails && mode != modeNoRun) || reason == "" {
		return b, fmt.Errorf("%s:%d: ```sql %s: the info string must be empty, \"fails: <why>\" or \"norun: <why>\"", file, line, rest)
	}
	b.Mode, b.Reason = mode, reason
	return b, nil
}

// script is the psql input that runs a file's blocks in one session. Before each block it notes
// the time; after it, it waits for every request made since and checks them: all succeeded
// (run), or something failed (fails: a statement, seen in LAST_ERROR_SQLSTATE, or a request).
// A check that does not hold raises, and ON_ERROR_STOP ends psql with its exit code.
func script(blocks []block) string {
	var s strings.Builder
	s.WriteString("\\set ON_ERROR_STOP on\n")
	for _, b := range blocks {
		if b.Mode == modeNoRun {
			continue
		}
		fmt.Fprintf(&s, "\\echo '>>> doc block %s (%s)'\n", b.where(), b.Mode)
		s.WriteString("SELECT clock_timestamp() AS doctest_t0 \\gset\n")
		if b.Mode == modeFails {
			s.WriteString("\\set LAST_ERROR_SQLSTATE 00000\n\\set ON_ERROR_STOP off\n")
		}
		s.WriteString(b.SQL)
		s.WriteString("\\set ON_ERROR_STOP on\n")
		s.WriteString(`SELECT coalesce(bool_or(w.status <> 'succeeded'), false) AS doctest_request_failed,
       coalesce(string_agg(r.kind || ' ' || w.status || ': ' || coalesce(w.error, ''), ' / '), 'none') AS doctest_requests
  FROM dataenv.requests r CROSS JOIN LATERAL dataenv.wait(r.id, '5 min') w
 WHERE r.created_at >= :'doctest_t0' \gset
`)
		if b.Mode == modeRun {
			fmt.Fprintf(&s, "\\if :doctest_request_failed\n\\warn 'doc block %s: a request failed:' :'doctest_requests'\n", b.where())
			fmt.Fprintf(&s, "DO $doctest$ BEGIN RAISE EXCEPTION 'doc block %s: a request it made failed'; END $doctest$;\n\\endif\n", b.where())
			continue
		}
		s.WriteString("SELECT :'doctest_request_failed'::boolean OR :'LAST_ERROR_SQLSTATE' <> '00000' AS doctest_failed \\gset\n")
		fmt.Fprintf(&s, "\\if :doctest_failed\n\\else\nDO $doctest$ BEGIN RAISE EXCEPTION 'doc block %s is marked fails, but nothing in it failed'; END $doctest$;\n\\endif\n", b.where())
	}
	return s.String()
}

func readBlocks(t *testing.T, path, name string) []block {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks(name, string(text))
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// The convention refuses what would silently skip a block.
func TestBlockConvention(t *testing.T) {
	md := "text\n```sql\nSELECT 1;\n```\n```bash\nls\n```\n```sql fails: shows the error\nSELECT 1/0;\n```\n" +
		"```sql norun: needs an S3 endpoint\nSELECT 2;\n```\n"
	blocks, err := parseBlocks("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		got = append(got, fmt.Sprintf("%d %s %q %q", b.Line, b.Mode, b.Reason, b.SQL))
	}
	want := `2 run "" "SELECT 1;\n" 8 fails "shows the error" "SELECT 1/0;\n" 11 norun "needs an S3 endpoint" "SELECT 2;\n"`
	if strings.Join(got, " ") != want {
		t.Fatalf("blocks:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	for _, bad := range []string{"```sql norun\nx\n```\n", "```sql skip: why\nx\n```\n", "```sql fails:\nx\n```\n", "```sql\nx\n"} {
		if _, err := parseBlocks("x.md", bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

var (
	// a psql meta-command followed by a comment: psql reads the comment as arguments
	// (`\gset  -- x` sets nothing and warns about "--x").
	metaThenComment = regexp.MustCompile(`(^|\s)\\[a-z]+\b[^'\n]*--`)
	// a wait that hides why a request failed
	waitWithoutError = regexp.MustCompile(`(?i)SELECT\s+status\s*,\s*result\s+FROM\s+dataenv\.wait`)
)

// What readers copy is free of the two traps a newcomer fell into: a comment after a psql
// meta-command, and a wait that shows a failure without its error.
func TestExamplesAvoidPsqlTraps(t *testing.T) {
	files := docFiles(t)
	sqls, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sqls {
		files = append(files, filepath.Join("examples", filepath.Base(f)))
	}
	for _, name := range files {
		var texts []block
		if strings.HasSuffix(name, ".sql") {
			b, err := os.ReadFile(filepath.Join(repoRoot(), name))
			if err != nil {
				t.Fatal(err)
			}
			texts = []block{{File: name, Line: 1, SQL: string(b)}}
		} else {
			texts = readBlocks(t, filepath.Join(repoRoot(), name), name)
		}
		for _, b := range texts {
			for i, line := range strings.Split(b.SQL, "\n") {
				if metaThenComment.MatchString(line) || waitWithoutError.MatchString(line) {
					t.Errorf("%s:%d: %s (no comment after a psql meta-command; select status, error, result from wait)",
						b.File, b.Line+i+boolInt(!strings.HasSuffix(name, ".sql")), line)
				}
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
