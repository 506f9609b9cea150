package pipeline_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// gate is a TCP forwarder to the test cluster that, while closed, accepts connections and resets
// them at once: what a client sees of a server that is restarting.
type gate struct {
	ln      net.Listener
	target  string
	open    atomic.Bool
	refused chan struct{} // a value per connection reset while closed
	wg      sync.WaitGroup
}

func newGate(t *testing.T, target string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, target: target, refused: make(chan struct{}, 1024)}
	g.wg.Add(1)
	go g.serve()
	t.Cleanup(func() { _ = ln.Close(); g.wg.Wait() })
	return g
}

func (g *gate) serve() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		if !g.open.Load() {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // an RST, like a server going away
			}
			_ = c.Close()
			select {
			case g.refused <- struct{}{}:
			default:
			}
			continue
		}
		go forward(c, g.target)
	}
}

func forward(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}

// TestSidecarWaitsForItsControlDatabase: a sidecar started while its control database cannot be
// reached (a server restarting resets every connection) keeps trying instead of exiting, and
// serves requests once the server is back.
func TestSidecarWaitsForItsControlDatabase(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	target := fmt.Sprintf("%s:%d", pg.Host(), pg.Port())
	g := newGate(t, target)
	gated := strings.Replace(dsn, target, g.ln.Addr().String(), 1)
	if gated == dsn {
		t.Fatalf("the control DSN %q does not name %s", dsn, target)
	}
	sc := sidecartest.Start(t, sidecartest.Options{DSN: gated})
	for range 3 { // three connection attempts reset: the sidecar tried, and tried again
		select {
		case <-g.refused:
		case <-sc.Exited():
			t.Fatalf("the sidecar exited while its control database was unreachable:\n%s", sc.Logs())
		case <-time.After(2 * time.Minute):
			t.Fatal("the sidecar did not try to connect")
		}
	}
	g.open.Store(true)
	id := newRequest(t, conn, "ping", `{}`)
	if row := sidecartest.Wait(t, conn, id, 60*time.Second); row.Status != "succeeded" {
		t.Fatalf("ping is %s once the control database could be reached", row.Status)
	}
	select {
	case <-sc.Exited():
		t.Fatalf("the sidecar exited:\n%s", sc.Logs())
	default:
	}
}
