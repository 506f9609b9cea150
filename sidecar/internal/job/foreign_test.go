package job

import "testing"

// A connection the job's own SQL named fails the job; one of the catalogs dataenv attached (its
// connection string carries the attempt's application_name) is a fault worth another attempt.
func TestForeignConnection(t *testing.T) {
	cases := map[string]bool{
		`IO Error: Unable to connect to Postgres at "host=127.0.0.1 port=1 dbname=x user=postgres": connection to server at "127.0.0.1", port 1 failed: Connection refused`:                                 true,
		`IO Error: Unable to connect to Postgres at "dbname='lake' sslmode='disable' application_name='dataenv/0123456789ab/00/2'": connection to server at "127.0.0.1", port 5 failed: Connection refused`: false,
		`Invalid Error: Failed to execute query "ROLLBACK": `: false,
	}
	for msg, want := range cases {
		if got := foreignConnection(msg); got != want {
			t.Errorf("foreignConnection(%q) = %v, want %v", msg, got, want)
		}
	}
}
