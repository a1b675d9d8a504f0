set -e
umask 022
mkdir -p site/bin site/secrets site/uploads site/public/css site/public/js
echo '#!/bin/sh' > site/bin/run.sh; echo 'echo hi' > site/bin/deploy.sh; echo 'notes' > site/bin/README
echo 'KEY=abc' > site/secrets/api.env; echo 'pw' > site/secrets/db.pass
echo '<html></html>' > site/public/index.html; echo 'body{}' > site/public/css/site.css
echo 'x=1' > site/public/js/app.js; echo 'ok' > site/uploads/.keep; echo 'cfg' > site/config.ini
chmod 644 site/bin/run.sh; chmod 700 site/bin/deploy.sh; chmod 777 site/bin/README
chmod 644 site/secrets/api.env; chmod 666 site/secrets/db.pass; chmod 777 site/secrets
chmod 600 site/public/index.html; chmod 755 site/public/css/site.css; chmod 700 site/public/js
chmod 755 site/uploads; chmod 646 site/config.ini
