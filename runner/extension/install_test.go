package extension

import "testing"

func TestParseInstall(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"force  install HTTPFS;", "FORCE INSTALL httpfs", true},
		{"INSTALL bigquery FROM community;", "INSTALL bigquery FROM community", true},
		{"install ducklake", "INSTALL ducklake", true},
		{"INSTALL x FROM 'http://evil';", "", false},
		{"INSTALL '/tmp/x.so';", "", false},
		{"SELECT 'FORCE INSTALL x';", "", false},
		{"INSTALL a; INSTALL b;", "", false},
	}
	for _, c := range cases {
		got, ok := ParseInstall(c.in)
		if ok != c.ok || (ok && got.String() != c.want) {
			t.Errorf("ParseInstall(%q) = %q, %v; want %q, %v", c.in, got.String(), ok, c.want, c.ok)
		}
	}
}
