package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/dataenv/dataenv/runner/protocol"
)

// readResult reads the runner's response. The runner (jailed or not) can write to the
// directory, so the file is opened without following a symlink, must be a regular file, and is
// read up to max bytes.
func readResult(path string, max int64) (*protocol.Response, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, ErrResultSymlink
	}
	if err != nil {
		return nil, fmt.Errorf("open the runner's result: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat the runner's result: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the runner's result is not a regular file (%s); refused", st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read the runner's result: %w", err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("the runner's result is larger than %d bytes; refused", max)
	}
	var resp protocol.Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("decode the runner's result: %w", err)
	}
	return &resp, nil
}
