"""ohsync.packaging — templates of the files ``ohsync autostart`` installs.

``ohsync.service`` (systemd user unit), ``ohsync-tray.desktop`` (XDG
autostart entry) and ``org.ohsync.daemon.plist`` (macOS LaunchAgent); see
:mod:`ohsync.daemon.autostart`.  Data only: nothing here is imported.
"""
