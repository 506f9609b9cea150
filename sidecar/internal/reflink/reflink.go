// Package reflink tells whether the file system holding a path can clone files (share their
// extents, copy-on-write): what PostgreSQL 18's file_copy_method = clone needs to make
// CREATE DATABASE ... STRATEGY FILE_COPY instant. On Linux, PostgreSQL clones with
// copy_file_range(2), which file systems without reflink silently turn into a full copy, so the
// answer has to come from the file system itself:
//
//   - Btrfs always clones;
//   - XFS clones when it was made with reflink (mkfs.xfs -m reflink=1, the default since
//     xfsprogs 5.1), which its geometry reports;
//   - anything else (ext4, tmpfs, overlay, NFS, ...) is reported as unable.
//
// The check only reads: statfs(2) of the path and, for XFS, the geometry of its file system.
package reflink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

const (
	btrfsMagic = 0x9123683e
	xfsMagic   = 0x58465342
	// XFS_IOC_FSGEOMETRY_V1 = _IOR('X', 100, struct xfs_fsop_geom_v1), 112 bytes; the flags
	// word sits at byte 92 and XFS_FSOP_GEOM_FLAGS_REFLINK is 1<<20.
	xfsIocFSGeometryV1 = 2<<30 | 112<<16 | 'X'<<8 | 100
	xfsGeomFlagsOffset = 92
	xfsGeomFlagReflink = 1 << 20
)

var names = map[int64]string{
	0xef53: "ext4", 0x01021994: "tmpfs", 0x794c7630: "overlayfs", 0x6969: "nfs",
	0x2fc12fc1: "zfs", 0x65735546: "fuse", 0xff534d42: "cifs", 0x858458f6: "ramfs",
}

// Check returns nil when the file system holding path can clone files, else an error that
// says why not (the path is not there, or the file system it is on, by name).
func Check(path string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is not visible on this machine", path)
		}
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	switch int64(st.Type) {
	case btrfsMagic:
		return nil
	case xfsMagic:
		return checkXFS(path)
	}
	name, ok := names[int64(st.Type)]
	if !ok {
		name = fmt.Sprintf("a file system of type 0x%x", st.Type)
	}
	return fmt.Errorf("%s is on %s, which cannot clone files (Btrfs or XFS with reflink can)", path, name)
}

// checkXFS reads the XFS geometry of the file system holding path for its reflink flag.
func checkXFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s is on XFS, and its geometry (reflink or not) cannot be read: %w", path, err)
	}
	defer f.Close()
	var geom [112]byte
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), xfsIocFSGeometryV1, uintptr(unsafe.Pointer(&geom[0]))); errno != 0 {
		return fmt.Errorf("%s is on XFS, and its geometry (reflink or not) cannot be read: %w", path, errno)
	}
	flags := binary.NativeEndian.Uint32(geom[xfsGeomFlagsOffset:])
	if flags&xfsGeomFlagReflink == 0 {
		return fmt.Errorf("%s is on XFS made without reflink (mkfs.xfs -m reflink=1), which cannot clone files", path)
	}
	return nil
}
