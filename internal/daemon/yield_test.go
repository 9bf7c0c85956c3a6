package daemon

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
)

// A yielding connection passes every byte through, in order, across many
// yields.
func TestYieldingConnPassesBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	yl := yieldingListener{ln}
	defer yl.Close()
	want := make([]byte, 3*yieldEvery+12345)
	if _, err := rand.Read(want); err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = c.Write(want)
	}()
	c, err := yl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*yieldingConn); !ok {
		t.Fatalf("Accept returned %T, want a *yieldingConn", c)
	}
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(want))
	}
}
