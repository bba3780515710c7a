//! cutrace-doctor: admin checks over a filesystem root; ELF audit; DCGM pause guard.
