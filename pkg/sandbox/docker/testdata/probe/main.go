// Command probe tries privileged system calls and prints one line per call:
// its name and the errno it got ("ok" when it succeeded). The docker
// sandbox's security tests run it inside a sandbox.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	try := func(name string, err error) {
		if err == nil {
			fmt.Printf("%s ok\n", name)
			return
		}
		if errno, ok := err.(syscall.Errno); ok {
			fmt.Printf("%s %d %v\n", name, int(errno), errno)
			return
		}
		fmt.Printf("%s other %v\n", name, err)
	}
	_ = os.MkdirAll("/tmp/probe-mnt", 0o755)
	try("mount", syscall.Mount("none", "/tmp/probe-mnt", "tmpfs", 0, ""))
	try("unshare_user", syscall.Unshare(syscall.CLONE_NEWUSER))
	try("unshare_mount", syscall.Unshare(syscall.CLONE_NEWNS))
	try("unshare_net", syscall.Unshare(syscall.CLONE_NEWNET))
	try("ptrace_attach_init", syscall.PtraceAttach(1))
	try("chroot", syscall.Chroot("/tmp"))
	try("setuid_root", syscall.Setuid(0))
	try("mknod", syscall.Mknod("/tmp/probe-dev", syscall.S_IFCHR|0o600, 0x0101))
}
