# SPDX-License-Identifier: Apache-2.0
"""Azure's provisioning pieces for tests: an ovf-env.xml document as the
platform writes it on the provisioning CD-ROM (CustomData base64 in the
LinuxProvisioningConfigurationSet), an ISO 9660 image of it (xorriso), and a
fake wire server on loopback that serves a goal state and records health
reports (``GET /machine/?comp=goalstate``, ``POST /machine?comp=health``,
both demanding ``x-ms-version``, as the fabric does).
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import xml.etree.ElementTree as ET
from typing import List, Optional
from xml.sax.saxutils import escape



def ovf_env(custom_data: Optional[bytes], hostname: str = "cell-az",
            user: str = "azureuser") -> str:
    cd = ("<CustomData>%s</CustomData>" % base64.b64encode(custom_data).decode()
          if custom_data is not None else "")
    return f"""<?xml version="1.0" encoding="utf-8"?>
<Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:oe="http://schemas.dmtf.org/ovf/environment/1" xmlns:wa="http://schemas.microsoft.com/windowsazure" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
  <wa:ProvisioningSection>
    <wa:Version>1.0</wa:Version>
    <LinuxProvisioningConfigurationSet xmlns="http://schemas.microsoft.com/windowsazure" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
      <ConfigurationSetType>LinuxProvisioningConfiguration</ConfigurationSetType>
      <HostName>{escape(hostname)}</HostName>
      <UserName>{escape(user)}</UserName>
      <UserPassword i:nil="true" />
      <DisableSshPasswordAuthentication>true</DisableSshPasswordAuthentication>
      {cd}
      <SSH><PublicKeys /><KeyPairs /></SSH>
    </LinuxProvisioningConfigurationSet>
  </wa:ProvisioningSection>
  <wa:PlatformSettingsSection>
    <PlatformSettings xmlns="http://schemas.microsoft.com/windowsazure">
      <KmsServerHostname>kms.core.windows.net</KmsServerHostname>
      <ProvisionGuestAgent>false</ProvisionGuestAgent>
    </PlatformSettings>
  </wa:PlatformSettingsSection>
</Environment>
"""


def make_iso(directory: str, ovf: str, path: str) -> str:
    """An ISO 9660 image holding ovf-env.xml, as on the provisioning CD."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "ovf-env.xml"), "w") as f:
        f.write(ovf)
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-V", "rd_rdfe_stable.test",
                    "-J", "-r", "-o", path, directory], check=True, capture_output=True)
    return path


GOAL_STATE = """<?xml version="1.0" encoding="utf-8"?>
<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="goalstate10.xsd">
  <Version>2012-11-30</Version>
  <Incarnation>{incarnation}</Incarnation>
  <Machine><ExpectedState>Started</ExpectedState><StopRolesDeadlineHint>300000</StopRolesDeadlineHint></Machine>
  <Container>
    <ContainerId>{container_id}</ContainerId>
    <RoleInstanceList>
      <RoleInstance>
        <InstanceId>{instance_id}</InstanceId>
        <State>Started</State>
      </RoleInstance>
    </RoleInstanceList>
  </Container>
</GoalState>
"""


class WireServer:
    """The fabric's wire server: goal state out, health reports in."""

    def __init__(self, incarnation: str = "1",
                 container_id: str = "a7d1a4d5-5e53-4b7a-9d1e-1c3e1b0f5e11",
                 instance_id: str = "b9f3c2e1-0a2b-4c5d-8e9f-0123456789ab.cell-az"):
        self.incarnation, self.container_id, self.instance_id = \
            incarnation, container_id, instance_id
        self.health: List[ET.Element] = []
        self.requests: List[tuple] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status: int, body: str = "", ctype: str = "text/plain"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                outer.requests.append(("GET", self.path, dict(self.headers.items())))
                if self.headers.get("x-ms-version") != "2012-11-30":
                    return self._reply(400, "missing x-ms-version")
                if self.path != "/machine/?comp=goalstate":
                    return self._reply(404)
                self._reply(200, GOAL_STATE.format(
                    incarnation=outer.incarnation, container_id=outer.container_id,
                    instance_id=outer.instance_id), "text/xml; charset=utf-8")

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                outer.requests.append(("POST", self.path, dict(self.headers.items())))
                if self.headers.get("x-ms-version") != "2012-11-30":
                    return self._reply(400, "missing x-ms-version")
                if self.path != "/machine?comp=health":
                    return self._reply(404)
                if not (self.headers.get("Content-Type") or "").startswith("text/xml"):
                    return self._reply(400, "want text/xml")
                try:
                    doc = ET.fromstring(body)
                except ET.ParseError:
                    return self._reply(400, "bad XML")
                outer.health.append(doc)
                self._reply(200)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def ready_reports(self) -> List[dict]:
        """Each health report as {incarnation, container, instance, state}."""
        return [{"incarnation": d.findtext("GoalStateIncarnation"),
                 "container": d.findtext("Container/ContainerId"),
                 "instance": d.findtext("Container/RoleInstanceList/Role/InstanceId"),
                 "state": d.findtext("Container/RoleInstanceList/Role/Health/State")}
                for d in self.health]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
